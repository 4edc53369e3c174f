package integration_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/internal/enginefacts"
)

// What published_test.go reads: the published manifests in
// testdata/published, and where engines.yaml says an engine serves.

// publishedDeployment returns the Deployment of the name in the file under
// testdata/published, decoded strictly (a field the API does not know fails).
func publishedDeployment(file, name string) *appsv1.Deployment {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join("testdata", "published", file))
	Expect(err).NotTo(HaveOccurred())
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var names []string
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		Expect(err).NotTo(HaveOccurred())
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		Expect(yaml.Unmarshal(doc, &head)).To(Succeed())
		if head.Kind != "Deployment" {
			continue
		}
		names = append(names, head.Metadata.Name)
		if head.Metadata.Name == name {
			d := &appsv1.Deployment{}
			Expect(yaml.UnmarshalStrict(doc, d)).To(Succeed(), "%s: Deployment %s", file, name)
			return d
		}
	}
	Fail(fmt.Sprintf("%s holds no Deployment %s (it holds %v)", file, name, names))
	return nil
}

// commandWords are the words of a container's command line; a shell's
// script (sh -c "...") is split at white space.
func commandWords(c *corev1.Container) []string {
	words := slices.Concat(c.Command, c.Args)
	if len(words) >= 3 && slices.Contains([]string{"sh", "bash"}, path.Base(words[0])) && words[1] == "-c" {
		return append(strings.Fields(words[2]), words[3:]...)
	}
	return words
}

// servedEndpoint is where engines.yaml says the engine that the container
// runs serves its readiness endpoint: of the engines modelgate.io/engine
// selects, the one whose command the command line runs; its readiness
// path; its port: for an endpoint on a status port, that variable's value
// (0 when it is unset, negative or not a port: the server is off), else the
// last value of its port flag after the command, else the flag's variable,
// else its default port.
func servedEndpoint(t *enginefacts.Table, annotation string, c *corev1.Container) (port int32, probePath string) {
	GinkgoHelper()
	words := commandWords(c)
	var e enginefacts.Engine
	start := -1
	for _, candidate := range t.Annotated(annotation) {
		for _, cmd := range candidate.Commands {
			for i := 0; i+len(cmd.Argv) <= len(words); i++ {
				if slices.Equal(words[i:i+len(cmd.Argv)], cmd.Argv) {
					e, start = candidate, i+len(cmd.Argv)
				}
			}
		}
	}
	Expect(start).NotTo(Equal(-1), "container %s runs none of the commands engines.yaml lists for %s: %q", c.Name, annotation, words)
	ready, ok := e.Endpoint(enginefacts.RoleReadiness)
	Expect(ok).To(BeTrue(), "engines.yaml: %s has no readiness endpoint", e.Name)
	env := map[string]string{}
	for _, v := range c.Env {
		if v.ValueFrom == nil {
			env[v.Name] = v.Value
		}
	}
	toPort := func(s string) int32 {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 1 || n > 65535 {
			return 0
		}
		return int32(n)
	}
	if ready.Port != "" {
		v, ok := e.Variable(ready.Port)
		Expect(ok).To(BeTrue(), "engines.yaml: %s has no %s variable", e.Name, ready.Port)
		value, set := env[v.Name]
		if !set {
			value = v.Default
		}
		return toPort(value), ready.Path
	}
	args := words[start:]
	for _, f := range e.FlagsWith(enginefacts.RolePort) {
		value := ""
		for i, w := range args {
			for _, n := range f.Names {
				switch {
				case w == n && i+1 < len(args):
					value = args[i+1]
				case strings.HasPrefix(w, n+"="):
					value = strings.TrimPrefix(w, n+"=")
				}
			}
		}
		if value == "" && f.Env != "" {
			value = env[f.Env]
		}
		if value != "" {
			return toPort(value), ready.Path
		}
	}
	return toPort(e.DefaultPort()), ready.Path
}
