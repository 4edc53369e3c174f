package kubelet

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestLoaderMessageTarget(t *testing.T) {
	for name, c := range map[string]struct {
		argv []string
		want string
	}{
		"default":             {[]string{"/modelgate", "load", "--uri=s3://b/p", "--dest=/models"}, "/dev/termination-log"},
		"flag with =":         {[]string{"/modelgate", "load", "--termination-log=/tmp/m"}, "/tmp/m"},
		"flag and value":      {[]string{"/modelgate", "load", "-termination-log", "/tmp/m"}, "/tmp/m"},
		"the last flag wins":  {[]string{"/modelgate", "load", "--termination-log=/a", "--termination-log=/b"}, "/b"},
		"off":                 {[]string{"/modelgate", "load", "--termination-log="}, ""},
		"after -- is no flag": {[]string{"/modelgate", "load", "--", "--termination-log=/a"}, "/dev/termination-log"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := loaderMessageTarget(c.argv); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	for argv, want := range map[string]bool{
		"/modelgate load":               true,
		"/usr/local/bin/modelgate load": true,
		"/modelgate serve":              false,
		"/loader load":                  false,
		"/modelgate":                    false,
	} {
		if got := isModelgateLoader(strings.Fields(argv)); got != want {
			t.Errorf("isModelgateLoader(%s) = %t, want %t", argv, got, want)
		}
	}
}

func TestPodHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	for name, c := range map[string]struct {
		pod  corev1.Pod
		want string
	}{
		"the pod's name":               {corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "llm-7d9f-x2"}}, "llm-7d9f-x2"},
		"spec.hostname":                {corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Hostname: "h"}}, "h"},
		"cut to 63 without a last '-'": {corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: long}}, strings.Repeat("a", 62)},
	} {
		t.Run(name, func(t *testing.T) {
			if got := podHostname(&c.pod); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestFallbackMessage(t *testing.T) {
	var lines []string
	for i := range 100 {
		lines = append(lines, "line "+string(rune('A'+i%26)))
	}
	out := strings.Join(lines, "\n") + "\n"
	want := strings.Join(lines[20:], "\n") + "\n"
	if got := fallbackMessage([]byte(out)); got != want {
		t.Errorf("the last 80 lines: got %q", got)
	}
	big := strings.Repeat("0123456789", 500)
	if got := fallbackMessage([]byte(big)); got != big[len(big)-2048:] {
		t.Errorf("the last 2048 bytes: got %d bytes", len(got))
	}
}

// fakeLoader stands for modelgate's loader: it writes its outcome to the
// --termination-log file if that exists (as the loader does), and leaves
// its environment, host name and arguments in --dest.
const fakeLoader = `#!/bin/sh
for a in "$@"; do
	case "$a" in
	--termination-log=*) tl="${a#--termination-log=}" ;;
	--dest=*) dest="${a#--dest=}" ;;
	esac
done
[ -e "$tl" ] && printf 'loaded 1 files, verified' > "$tl"
echo "args: $*"
env | sort > "$dest/env"
cat /proc/sys/kernel/hostname > "$dest/hostname"
pwd > "$dest/pwd"
exit "${CODE:-0}"
`

func runPod(name string, ctr corev1.Container) *corev1.Pod {
	p := testPod(ctr)
	p.Name, p.UID = name, types.UID("uid-"+name)
	p.Spec.Volumes = []corev1.Volume{{Name: "model-store", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	return p
}

func loaderContainer() corev1.Container {
	return corev1.Container{
		Name:                     "model-loader",
		Command:                  []string{"/modelgate", "load"},
		Args:                     []string{"--uri=hf://acme/tiny-llm", "--dest=/models"},
		EnvFrom:                  []corev1.EnvFromSource{{SecretRef: secretRef("creds", false)}},
		Env:                      []corev1.EnvVar{{Name: "GREETING", Value: "token is $(TOKEN)"}},
		VolumeMounts:             []corev1.VolumeMount{{Name: "model-store", MountPath: "/models"}},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

func TestRun(t *testing.T) {
	sh, err := os.Stat("/bin/sh")
	if err != nil || sh.IsDir() {
		t.Skip("no /bin/sh")
	}
	t.Setenv("KUBELET_TEST_LEAK", "from the test process")
	bin := filepath.Join(t.TempDir(), "modelgate")
	if err := os.WriteFile(bin, []byte(fakeLoader), 0o700); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithObjects(client.Object(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "team"},
		Data:       map[string][]byte{"TOKEN": []byte("s3cr3t")},
	})).Build()
	binaries := map[string]string{"/modelgate": bin, "/bin/sh": "/bin/sh"}
	ctx := context.Background()

	// A process started with Pdeathsig, as the simulated cluster starts
	// its components, dies with the thread that started it: Run must end
	// no thread of the test process, nor leave one in a Pod's namespace.
	sentinel := exec.Command("/bin/sh", "-c", "sleep 60")
	sentinel.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := sentinel.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sentinel.Wait(); close(exited) }()
	machine, _ := os.Hostname()
	t.Cleanup(func() {
		select {
		case <-exited:
			t.Error("a process the test started with Pdeathsig was killed: a thread of the test process ended")
		default:
			_ = sentinel.Process.Kill()
		}
		var wg sync.WaitGroup
		for range 4 * runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				if h, _ := os.Hostname(); h != machine {
					t.Errorf("a thread of the test process has the host name %q, not %q", h, machine)
				}
			})
		}
		wg.Wait()
	})

	t.Run("the loader: environment, paths, host name and termination message", func(t *testing.T) {
		dir := t.TempDir()
		pod := runPod("llm-0", loaderContainer())
		r, err := Run(ctx, c, pod, "model-loader", Options{Dir: dir, Binaries: binaries, Env: []string{"PATH=/usr/bin:/bin"}})
		if err != nil {
			t.Fatalf("Run: %v\n%s", err, r.Output)
		}
		host := filepath.Join(dir, "pods", "uid-llm-0", "volumes", "kubernetes.io~empty-dir", "model-store")
		if diff := cmp.Diff(map[string]string{"model-store": host}, r.Volumes); diff != "" {
			t.Errorf("volumes (-want +got):\n%s", diff)
		}
		if r.ExitCode != 0 || r.Message != "loaded 1 files, verified" || r.PeakRSS <= 0 || r.Duration <= 0 {
			t.Errorf("exit %d, message %q, peak RSS %d, duration %s", r.ExitCode, r.Message, r.PeakRSS, r.Duration)
		}
		if !strings.Contains(string(r.Output), "--dest="+host+" --termination-log="+filepath.Join(dir, "pods", "uid-llm-0", "containers", "model-loader")) {
			t.Errorf("arguments not translated, or no termination log: %s", r.Output)
		}
		envFile := readFile(t, filepath.Join(host, "env"))
		for _, want := range []string{"TOKEN=s3cr3t\n", "GREETING=token is s3cr3t\n", "HOSTNAME=llm-0\n", "PATH=/usr/bin:/bin\n"} {
			if !strings.Contains(envFile, want) {
				t.Errorf("environment lacks %q:\n%s", want, envFile)
			}
		}
		if strings.Contains(envFile, "KUBELET_TEST_LEAK") {
			t.Errorf("the test's environment leaked into the container's:\n%s", envFile)
		}
		if pwd := strings.TrimSpace(readFile(t, filepath.Join(host, "pwd"))); !strings.HasPrefix(pwd, dir) {
			t.Errorf("working directory %s is not under Options.Dir", pwd)
		}
		if CanSetHostname() {
			if got := strings.TrimSpace(readFile(t, filepath.Join(host, "hostname"))); got != "llm-0" || r.Hostname != "llm-0" {
				t.Errorf("host name %q (result %q), want the pod's name", got, r.Hostname)
			}
			if h, _ := os.Hostname(); h == "llm-0" {
				t.Errorf("the test process's host name changed to %q", h)
			}
		}
	})

	t.Run("no termination message where the loader would not write it", func(t *testing.T) {
		ctr := loaderContainer()
		ctr.TerminationMessagePath = "/tmp/message"
		r, err := Run(ctx, c, runPod("llm-1", ctr), "model-loader", Options{Dir: t.TempDir(), Binaries: binaries})
		if err != nil || r.Message != "" || strings.Contains(string(r.Output), "--termination-log") {
			t.Errorf("Run: %v, message %q, output %s", err, r.Message, r.Output)
		}
	})

	t.Run("a failure: exit code, and the log as message with FallbackToLogsOnError", func(t *testing.T) {
		ctr := corev1.Container{Name: "fail", Command: []string{"/bin/sh", "-c"}, Args: []string{"echo one; echo two >&2; exit 3"},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}
		r, err := Run(ctx, c, runPod("p", ctr), "fail", Options{Dir: t.TempDir(), Binaries: binaries})
		if err != nil || r.ExitCode != 3 || r.Message != "one\ntwo\n" || string(r.Output) != "one\ntwo\n" {
			t.Errorf("Run: %v, exit %d, message %q, output %q", err, r.ExitCode, r.Message, r.Output)
		}
		ctr.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		r, err = Run(ctx, c, runPod("p", ctr), "fail", Options{Dir: t.TempDir(), Binaries: binaries})
		if err != nil || r.Message != "" {
			t.Errorf("Run with policy File: %v, message %q", err, r.Message)
		}
	})

	t.Run("a timeout kills the process", func(t *testing.T) {
		ctr := corev1.Container{Name: "slow", Command: []string{"/bin/sh", "-c", "sleep 30"}}
		start := time.Now()
		r, err := Run(ctx, c, runPod("p", ctr), "slow", Options{Dir: t.TempDir(), Binaries: binaries, Timeout: 200 * time.Millisecond})
		if !errors.Is(err, context.DeadlineExceeded) || r == nil || r.ExitCode != 137 || time.Since(start) > 10*time.Second {
			t.Errorf("Run: %v, result %+v", err, r)
		}
	})

	for name, ctr := range map[string]corev1.Container{
		"an unmapped command": {Name: "x", Command: []string{"/usr/bin/python3"}},
		"no command":          {Name: "x", Args: []string{"serve"}},
		"a missing secret": {Name: "x", Command: []string{"/bin/sh"},
			EnvFrom: []corev1.EnvFromSource{{SecretRef: secretRef("absent", false)}}},
	} {
		t.Run("not started: "+name, func(t *testing.T) {
			if r, err := Run(ctx, c, runPod("p", ctr), "x", Options{Dir: t.TempDir(), Binaries: binaries}); err == nil {
				t.Errorf("no error; result %+v", r)
			}
		})
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
