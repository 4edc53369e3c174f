package hubtest_test

import (
	"fmt"
	"net/http"

	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// A private repository with a regular file and a generated LFS shard:
// point HF_ENDPOINT at URL and HF_TOKEN at the token, then assert what
// each route saw.
func Example() {
	hub := hubtest.New(hubtest.WithPageSize(2))
	defer hub.Close()
	repo := hubtest.OneCommit(
		hubtest.File{Path: "config.json", Content: loadertest.Bytes([]byte("{}"))},
		hubtest.File{Path: "model.safetensors", Content: loadertest.Generated(1, 8<<20), LFS: true},
	)
	repo.Private, repo.Tokens = true, []string{"hf_token"}
	hub.AddRepo("org/model", repo)

	req, _ := http.NewRequest(http.MethodGet, hub.URL()+"/org/model/resolve/main/model.safetensors", nil)
	req.Header.Set("Authorization", "Bearer hf_token")
	req.Header.Set("Range", "bytes=0-9")
	resp, err := hub.Client().Do(req) // Go forwards the token to the CDN: another port, same host
	if err != nil {
		panic(err)
	}
	_ = resp.Body.Close()
	fmt.Println(resp.StatusCode, hub.Requests(hubtest.RouteResolve), hub.Authorizations(hubtest.RouteCDN))
	// Output: 400 1 map[Bearer hf_token:1]
}
