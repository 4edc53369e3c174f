package deviceplugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestStartRefusesBadOptions(t *testing.T) {
	if _, err := Start(t.Context(), Options{PluginDir: socketDir(t)}); err == nil {
		t.Error("Start with no devices: no error")
	}
}

func TestStartReplacesStaleSocket(t *testing.T) {
	dir := socketDir(t)
	stale := filepath.Join(dir, DefaultSocketName)
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	k := startFakeKubelet(t, dir, 0)
	p := startPlugin(t, dir, Options{})
	k.next(t)
	fi, err := os.Stat(p.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		t.Errorf("%s is a %v, want a socket", p.SocketPath(), fi.Mode().Type())
	}
}

func TestStop(t *testing.T) {
	dir := socketDir(t)
	k := startFakeKubelet(t, dir, 0)
	p, err := Start(t.Context(), Options{PluginDir: dir, Devices: 1, PollInterval: testPoll})
	if err != nil {
		t.Fatal(err)
	}
	k.next(t)
	waitRegistered(t, p)

	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if exists(t, p.SocketPath()) {
		t.Error("the plugin socket is still there after Stop")
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := p.WaitRegistered(t.Context()); !errors.Is(err, ErrStopped) {
		t.Errorf("WaitRegistered after Stop = %v, want ErrStopped", err)
	}
}

func TestStopWithContext(t *testing.T) {
	dir := socketDir(t)
	ctx, cancel := context.WithCancel(t.Context())
	p, err := Start(ctx, Options{PluginDir: dir, Devices: 1, PollInterval: testPoll})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := p.WaitRegistered(t.Context()); !errors.Is(err, ErrStopped) {
		t.Errorf("WaitRegistered after the context ended = %v, want ErrStopped", err)
	}
	if exists(t, p.SocketPath()) {
		t.Error("the plugin socket is still there after the context ended")
	}
}

func TestStopKeepsAnotherSocket(t *testing.T) {
	dir := socketDir(t)
	path := filepath.Join(dir, "p.sock")
	s, err := listenAndServe(path, &service{devices: newDeviceSet([]string{"GPU-t-0"})})
	if err != nil {
		t.Fatal(err)
	}
	// Another server has taken the path since.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	other, err := listenAndServe(path, &service{devices: newDeviceSet([]string{"GPU-t-0"})})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.stop() }()

	if err := s.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if got := statID(path); got != other.id {
		t.Errorf("the newer socket is gone or replaced after the older server stopped: %+v, want %+v", got, other.id)
	}
}
