package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// These tests build the engine and run it as the image does: through a
// link named for the program, in a process of its own.

// buildEngine builds the engine into a new directory and links the
// programs named to it there.
func buildEngine(t *testing.T, links ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build the engine: %v", err)
	}
	dir := t.TempDir()
	out, err := exec.Command(goTool, "build", "-o", filepath.Join(dir, "engine"), ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, l := range links {
		if err := os.Symlink("engine", filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// get returns the status and body of GET url.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body json.RawMessage
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, body
}

func TestEngineServes(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	bin := buildEngine(t, "vllm")
	cache := t.TempDir()
	files := tinyModel(t)
	snap := writeSnapshot(t, cache, "org/tiny", commit, files)
	writeRef(t, cache, "org/tiny", "main", commit)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "vllm"), "serve", "org/tiny", "--host", "127.0.0.1", "--port", "0",
		"--served-model-name", "tiny", "--tensor-parallel-size", "1", "--trust-remote-code")
	cmd.Env = []string{"HF_HUB_CACHE=" + cache, "HF_HUB_OFFLINE=1", "ENGINE_LOAD_DELAY=2s", "HOME=" + t.TempDir()}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		for s := bufio.NewScanner(stdout); s.Scan(); {
			lines <- s.Text()
		}
	}()
	var addr string
	for addr == "" {
		line, ok := <-lines
		if !ok {
			t.Fatalf("the engine stopped before listening: %v\n%s", cmd.Wait(), stderr.String())
		}
		addr, _ = strings.CutPrefix(line, "engine: vllm listening on ")
	}
	base := "http://" + addr

	if code, _ := get(t, base+"/health"); code != http.StatusServiceUnavailable {
		t.Errorf("/health while loading = %d, want 503", code)
	}
	for {
		code, _ := get(t, base+"/health")
		if code == http.StatusOK {
			break
		}
		if code != http.StatusServiceUnavailable || ctx.Err() != nil {
			t.Fatalf("/health = %d (%v)\n%s", code, ctx.Err(), stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, body := get(t, base+"/v1/models")
	var models modelList
	if err := json.Unmarshal(body, &models); err != nil || code != http.StatusOK {
		t.Fatalf("/v1/models = %d %s: %v", code, body, err)
	}
	want := modelList{Object: "list", Data: []modelCard{{ID: "tiny", Object: "model", OwnedBy: "modelgate-test-engine", Root: snap}}}
	if diff := cmp.Diff(want, models); diff != "" {
		t.Errorf("/v1/models (-want +got):\n%s", diff)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for line := range lines {
		rest = append(rest, line)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v, want exit status 0\n%s", err, stderr.String())
	}
	loaded := fmt.Sprintf("engine: loaded org/tiny from %s: 2 tensors in 1 files, %d bytes, config LlamaForCausalLM",
		snap, len(files["model.safetensors"]))
	wantLog := []string{
		"engine: loading org/tiny (revision main); offline: HF_HUB_OFFLINE=1",
		fmt.Sprintf("engine: read model.safetensors: 2 tensors, %d bytes", len(files["model.safetensors"])),
		loaded,
	}
	if diff := cmp.Diff(wantLog, rest); diff != "" {
		t.Errorf("stdout after listening (-want +got):\n%s", diff)
	}
}

func TestEngineMissingModel(t *testing.T) {
	bin := buildEngine(t, "sh", "vllm")
	cache := t.TempDir()
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o666); err != nil { // the kubelet makes the file
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "sh"), "-c", `exec vllm serve "$MODEL" --host 127.0.0.1 --port 0`)
	cmd.Env = []string{"PATH=" + bin, "MODEL=org/missing", "HF_HUB_CACHE=" + cache, "HF_HUB_OFFLINE=1", "ENGINE_TERMINATION_LOG=" + termLog}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if exit := (*exec.ExitError)(nil); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("run: %v, want exit status 1\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	line := "engine: model org/missing (revision main) not found in HF cache " + cache + ": no such repo folder models--org--missing"
	wantErr := line + "\n" +
		"OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached files. " +
		"Check your internet connection or see how to run the library in offline mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'.\n"
	if diff := cmp.Diff(wantErr, stderr.String()); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	got, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(line+"\n", string(got)); diff != "" {
		t.Errorf("termination log (-want +got):\n%s", diff)
	}
}
