package podrunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Reasons a container waits with, as a kubelet reports them.
const (
	ReasonErrImagePull        = "ErrImagePull"
	ReasonConfigError         = "CreateContainerConfigError"
	ReasonCreateError         = "CreateContainerError"
	ReasonCrashLoopBackOff    = "CrashLoopBackOff"
	ReasonContainerCreating   = "ContainerCreating"
	ReasonRunContainerError   = "RunContainerError"
	reasonCompleted           = "Completed"
	reasonError               = "Error"
	reasonPodInitializing     = "PodInitializing"
	reasonContainersNotReady  = "ContainersNotReady"
	reasonPodCompleted        = "PodCompleted"
	reasonPodFailed           = "PodFailed"
	reasonContainersNotInited = "ContainersNotInitialized"
)

// Image maps container images to a binary built here.
type Image struct {
	// Repository is the image reference without tag or digest
	// ("registry.k8s.io/gateway-api/echo-basic"); every tag of it maps to Binary.
	Repository string
	Binary     string
}

// containerError is why a container cannot start: its waiting reason and message.
type containerError struct {
	reason, message string
}

// Error is the message alone: the reason travels apart, as in a container status.
func (e *containerError) Error() string { return e.message }

// plan is what a container runs: the binary, its arguments and environment, with paths under
// volume mounts rewritten to where the volume's files are.
type plan struct {
	name, image, binary string
	args                []string
	env                 []string
	ports               map[string]int32 // container port names -> numbers, for probes
}

// repository strips an image reference's tag and digest.
func repository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	// A colon after the last slash starts the tag (one before it is a registry's port).
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// binaryFor returns the binary an image maps to, or an ErrImagePull error naming the images
// the runner knows.
func binaryFor(images []Image, image string) (string, error) {
	repo := repository(image)
	known := make([]string, 0, len(images))
	for _, im := range images {
		if im.Repository == repo {
			return im.Binary, nil
		}
		known = append(known, im.Repository)
	}
	sort.Strings(known)
	return "", &containerError{ReasonErrImagePull, fmt.Sprintf("image %q: the pod runner has no binary for repository %q (it runs: %s)", image, repo, strings.Join(known, ", "))}
}

// objects reads what a Pod's environment and volumes refer to.
type objects struct {
	client kubernetes.Interface
	pod    *corev1.Pod
	podIP  string
	hostIP string
}

func (o *objects) secret(ctx context.Context, name string, optional *bool) (map[string][]byte, error) {
	s, err := o.client.CoreV1().Secrets(o.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, &containerError{ReasonConfigError, fmt.Sprintf("secret %q: %v", name, err)}
	}
	return s.Data, nil
}

func (o *objects) configMap(ctx context.Context, name string, optional *bool) (map[string][]byte, error) {
	cm, err := o.client.CoreV1().ConfigMaps(o.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, &containerError{ReasonConfigError, fmt.Sprintf("configmap %q: %v", name, err)}
	}
	out := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		out[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		out[k] = v
	}
	return out, nil
}

// data reads a Secret's or a ConfigMap's keys (kind "secret" or "configmap").
func (o *objects) data(ctx context.Context, kind, name string, optional *bool) (map[string][]byte, error) {
	if kind == "secret" {
		return o.secret(ctx, name, optional)
	}
	return o.configMap(ctx, name, optional)
}

var fieldKeyRE = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

// field resolves a downward-API fieldPath.
func (o *objects) field(path string) (string, error) {
	p := o.pod
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return o.podIP, nil
	case "status.hostIP", "status.hostIPs":
		return o.hostIP, nil
	}
	if m := fieldKeyRE.FindStringSubmatch(path); m != nil {
		if m[1] == "labels" {
			return p.Labels[m[2]], nil
		}
		return p.Annotations[m[2]], nil
	}
	return "", &containerError{ReasonConfigError, fmt.Sprintf("fieldRef %q is not supported by the pod runner", path)}
}

func (o *objects) selected(ctx context.Context, kind, name, key string, optional *bool) (string, bool, error) {
	data, err := o.data(ctx, kind, name, optional)
	if err != nil {
		return "", false, err
	}
	v, ok := data[key]
	if !ok {
		if optional != nil && *optional {
			return "", false, nil
		}
		return "", false, &containerError{ReasonConfigError, fmt.Sprintf("%s %q has no key %q", kind, name, key)}
	}
	return string(v), true, nil
}

// expand replaces $(NAME) with the value of an earlier variable, as the kubelet does in env
// values, command and args; $$ escapes a dollar, an unknown name stays as written.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// env resolves a container's envFrom and env, in the kubelet's order (env wins).
func (o *objects) env(ctx context.Context, c *corev1.Container) (map[string]string, []string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, from := range c.EnvFrom {
		var data map[string][]byte
		var err error
		switch {
		case from.ConfigMapRef != nil:
			data, err = o.configMap(ctx, from.ConfigMapRef.Name, from.ConfigMapRef.Optional)
		case from.SecretRef != nil:
			data, err = o.secret(ctx, from.SecretRef.Name, from.SecretRef.Optional)
		}
		if err != nil {
			return nil, nil, err
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(from.Prefix+k, string(data[k]))
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		var v string
		var ok = true
		var err error
		switch vf := e.ValueFrom; {
		case vf.FieldRef != nil:
			v, err = o.field(vf.FieldRef.FieldPath)
		case vf.SecretKeyRef != nil:
			v, ok, err = o.selected(ctx, "secret", vf.SecretKeyRef.Name, vf.SecretKeyRef.Key, vf.SecretKeyRef.Optional)
		case vf.ConfigMapKeyRef != nil:
			v, ok, err = o.selected(ctx, "configmap", vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key, vf.ConfigMapKeyRef.Optional)
		default:
			err = &containerError{ReasonConfigError, fmt.Sprintf("env %s: only value, fieldRef, secretKeyRef and configMapKeyRef are supported by the pod runner", e.Name)}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	return vars, order, nil
}

// writeVolumes writes every volume of the Pod under dir/volumes/NAME and returns each
// volume's directory (a hostPath volume is its own path).
func (o *objects) writeVolumes(ctx context.Context, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range o.pod.Spec.Volumes {
		vdir := filepath.Join(dir, "volumes", v.Name)
		files := map[string][]byte{}
		var err error
		switch {
		case v.HostPath != nil:
			out[v.Name] = v.HostPath.Path
			continue
		case v.EmptyDir != nil:
		case v.Secret != nil:
			err = o.addKeys(ctx, files, "secret", v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
		case v.ConfigMap != nil:
			err = o.addKeys(ctx, files, "configmap", v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional)
		case v.DownwardAPI != nil:
			err = o.addFields(files, v.DownwardAPI.Items)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				switch {
				case src.Secret != nil:
					err = o.addKeys(ctx, files, "secret", src.Secret.Name, src.Secret.Items, src.Secret.Optional)
				case src.ConfigMap != nil:
					err = o.addKeys(ctx, files, "configmap", src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional)
				case src.DownwardAPI != nil:
					err = o.addFields(files, src.DownwardAPI.Items)
				case src.ServiceAccountToken != nil:
					err = o.addToken(ctx, files, src.ServiceAccountToken)
				}
				if err != nil {
					break
				}
			}
		default:
			err = &containerError{ReasonConfigError, "only emptyDir, hostPath, secret, configMap, downwardAPI and projected volumes are supported by the pod runner"}
		}
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return nil, err
		}
		for p, b := range files {
			f := filepath.Join(vdir, p)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(f, b, 0o644); err != nil {
				return nil, err
			}
		}
		out[v.Name] = vdir
	}
	return out, nil
}

func (o *objects) addKeys(ctx context.Context, files map[string][]byte, kind, name string, items []corev1.KeyToPath, optional *bool) error {
	data, err := o.data(ctx, kind, name, optional)
	if err != nil {
		return err
	}
	if len(items) == 0 {
		for k, v := range data {
			files[k] = v
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return &containerError{ReasonConfigError, fmt.Sprintf("%s %q has no key %q", kind, name, it.Key)}
		}
		files[it.Path] = v
	}
	return nil
}

func (o *objects) addFields(files map[string][]byte, items []corev1.DownwardAPIVolumeFile) error {
	for _, it := range items {
		if it.FieldRef == nil {
			return &containerError{ReasonConfigError, fmt.Sprintf("downwardAPI %s: only fieldRef is supported by the pod runner", it.Path)}
		}
		v, err := o.field(it.FieldRef.FieldPath)
		if err != nil {
			return err
		}
		files[it.Path] = []byte(v)
	}
	return nil
}

// addToken mints a token bound to the Pod, as the kubelet does for the projected volume the
// ServiceAccount admission plugin adds to every Pod.
func (o *objects) addToken(ctx context.Context, files map[string][]byte, src *corev1.ServiceAccountTokenProjection) error {
	sa := o.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: o.pod.Name, UID: o.pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := o.client.CoreV1().ServiceAccounts(o.pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return &containerError{ReasonConfigError, fmt.Sprintf("token for service account %q: %v", sa, err)}
	}
	files[src.Path] = []byte(tr.Status.Token)
	return nil
}

// mount is a container's view of one volume mount: the path it names and where the files are.
type mount struct{ path, real string }

// rewrite replaces a leading mount path in s with the directory that holds its files (there
// is no root filesystem to mount onto).
func rewrite(s string, mounts []mount) string {
	for _, m := range mounts { // longest path first
		if s == m.path || strings.HasPrefix(s, m.path+"/") {
			return m.real + s[len(m.path):]
		}
	}
	return s
}

// planContainer resolves what one container runs.
func (o *objects) planContainer(ctx context.Context, images []Image, c *corev1.Container, volumes map[string]string) (*plan, error) {
	bin, err := binaryFor(images, c.Image)
	if err != nil {
		return nil, err
	}
	vars, order, err := o.env(ctx, c)
	if err != nil {
		return nil, err
	}
	var mounts []mount
	for _, vm := range c.VolumeMounts {
		real, ok := volumes[vm.Name]
		if !ok {
			return nil, &containerError{ReasonConfigError, fmt.Sprintf("volume mount %s: no volume %q", vm.MountPath, vm.Name)}
		}
		if vm.SubPath != "" {
			real = filepath.Join(real, vm.SubPath)
		}
		mounts = append(mounts, mount{path: strings.TrimSuffix(vm.MountPath, "/"), real: real})
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].path) > len(mounts[j].path) })
	p := &plan{name: c.Name, image: c.Image, binary: bin, ports: map[string]int32{}}
	args := c.Args
	if len(c.Command) > 0 {
		if filepath.Base(c.Command[0]) != filepath.Base(bin) && filepath.Base(c.Command[0]) != filepath.Base(repository(c.Image)) {
			return nil, &containerError{ReasonCreateError, fmt.Sprintf("command %q: the pod runner runs only the image's own binary (%s)", c.Command[0], filepath.Base(repository(c.Image)))}
		}
		args = append(append([]string{}, c.Command[1:]...), c.Args...)
	}
	for _, a := range args {
		p.args = append(p.args, rewrite(expand(a, vars), mounts))
	}
	for _, k := range order {
		p.env = append(p.env, k+"="+rewrite(vars[k], mounts))
	}
	for _, port := range c.Ports {
		if port.Name != "" {
			p.ports[port.Name] = port.ContainerPort
		}
	}
	return p, nil
}
