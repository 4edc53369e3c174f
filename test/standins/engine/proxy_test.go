package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// The proxy forwards to its upstream, logs each request without its
// headers, and sends redirects to the upstream back through itself.
func TestProxyHandler(t *testing.T) {
	var upstream *httptest.Server
	upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, upstream.URL+"/cdn/file", http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "upstream "+r.URL.Path)
	}))
	defer upstream.Close()
	up, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	proxy := httptest.NewServer(proxyHandler(up, &log))
	defer proxy.Close()

	req, _ := http.NewRequest(http.MethodGet, proxy.URL+"/moved", nil)
	req.Header.Set("Authorization", "Bearer hf_secretNeverLogged")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "upstream /cdn/file" {
		t.Errorf("body %q, want the upstream's /cdn/file", body)
	}
	got := log.String()
	for _, want := range []string{"proxy: GET /moved 302\n", "proxy: GET /cdn/file 200\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q: want %q (the redirect followed through the proxy)", got, want)
		}
	}
	if strings.Contains(got, "hf_secret") {
		t.Errorf("log %q has the Authorization header", got)
	}
}
