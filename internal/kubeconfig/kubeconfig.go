// Package kubeconfig owns writing a kubeconfig file from a client configuration, for the tools
// that hand credentials to Sluice's processes or to kubectl (the certificate generator for the
// compose setup, and the test harness for each test user).
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Write writes a kubeconfig file for cfg at path, with its credentials embedded, under one
// context named "sluice" that is also the current one.
func Write(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sluice"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["sluice"] = &clientcmdapi.Context{Cluster: "sluice", AuthInfo: "user"}
	kc.CurrentContext = "sluice"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
