package contract

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every fuzz target of the repository (both Go modules) is run by `make fuzz`: a target the
// Makefile forgets is only ever run on its seeds.
func TestMakeFuzzRunsEveryFuzzTarget(t *testing.T) {
	const root = "../.."
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	runs := makeFuzzRuns(t, string(mk))
	if len(runs) == 0 {
		t.Fatal("the Makefile has no fuzz target, or it runs nothing")
	}

	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz\w*)\(\w+ \*testing\.F\)`)
	found := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllStringSubmatch(string(src), -1) {
			found++
			if !runs[rel+" "+m[1]] {
				t.Errorf("%s: %s is not run by `make fuzz`; add to the Makefile's fuzz target:\n\t$(GO) test -run='^$$' -fuzz='^%s$$' -fuzztime=$(FUZZTIME) ./%s",
					filepath.Join(rel, filepath.Base(path)), m[1], m[1], filepath.ToSlash(rel))
			}
			delete(runs, rel+" "+m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("found no fuzz target in the repository: the search is broken")
	}
	for r := range runs {
		t.Errorf("`make fuzz` runs %s, which is no fuzz target of the repository", r)
	}
}

// makeFuzzRuns reads the recipe of the Makefile's fuzz target: "dir FuzzName" for every
// `go test -fuzz='^FuzzName$$' ... pkg` it runs (with `cd dir &&` before it, pkg is in dir;
// $(VAR)s are the Makefile's own).
func makeFuzzRuns(t *testing.T, mk string) map[string]bool {
	t.Helper()
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\w+)\s*:?=\s*(\S+)\s*$`).FindAllStringSubmatch(mk, -1) {
		vars[m[1]] = m[2]
	}
	expand := func(s string) string {
		return regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(s, func(v string) string {
			if x, ok := vars[v[2:len(v)-1]]; ok {
				return x
			}
			return v
		})
	}
	fuzzFlag := regexp.MustCompile(`-fuzz='\^(Fuzz\w*)\$\$'`)
	runs := map[string]bool{}
	in := false
	for _, line := range strings.Split(mk, "\n") {
		if !strings.HasPrefix(line, "\t") {
			in = strings.HasPrefix(line, "fuzz:")
			continue
		}
		m := fuzzFlag.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		line = expand(strings.TrimSpace(line))
		dir := "."
		if rest, ok := strings.CutPrefix(line, "cd "); ok {
			dir, line, _ = strings.Cut(rest, " && ")
		}
		fields := strings.Fields(line)
		pkg := filepath.Clean(filepath.Join(dir, fields[len(fields)-1]))
		runs[pkg+" "+m[1]] = true
	}
	return runs
}
