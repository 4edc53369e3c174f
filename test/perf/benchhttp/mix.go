package main

import (
	"bytes"
	"fmt"
)

// The /validate loads. A review is a repeat when the policies in force
// read the same of it as of an earlier one, as the N Pods of a Deployment
// or a GitOps re-apply are; then the decision cache answers it. A first
// review is one the policies have not judged yet: its serving container's
// image is new.

// servingImage is the benchmark Deployment's image; first reviews get a
// tag of their own.
const servingImage = "vllm/vllm-openai:v0.6.3"

// mix is a load's share of repeats: of every 100 requests, repeats are
// repeats (of repeatSet reviews in turn), the others first reviews.
type mix struct {
	name    string
	repeats int // per 100 requests, 0 to 100
}

// repeatSet is how many different reviews the repeats cycle through: the
// Deployments of a busy namespace.
const repeatSet = 32

// loads are the /validate loads: all first reviews, all repeats, and two
// mixes.
var loads = []mix{
	{"all first reviews", 0},
	{"90% repeats", 90},
	{"99% repeats", 99},
	{"all repeats", 100},
}

// bodies returns the load's body of request n: body itself with the
// serving image's tag made that of repeat n%repeatSet, or of first review
// n, by n's place in its hundred.
func (m mix) bodies(body []byte) (func(n uint64) []byte, error) {
	if !bytes.Contains(body, []byte(servingImage)) {
		return nil, fmt.Errorf("the /validate review has no image %s to vary", servingImage)
	}
	repeats := make([][]byte, repeatSet)
	for i := range repeats {
		repeats[i] = tagged(body, fmt.Sprintf("r%d", i))
	}
	return func(n uint64) []byte {
		if int(n%100) < m.repeats {
			return repeats[n%repeatSet]
		}
		return tagged(body, fmt.Sprintf("f%d", n))
	}, nil
}

// tagged is body with the serving image's tag suffixed.
func tagged(body []byte, suffix string) []byte {
	return bytes.Replace(body, []byte(servingImage), []byte(servingImage+"-"+suffix), 1)
}
