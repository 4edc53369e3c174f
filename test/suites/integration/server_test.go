package integration_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/webhook"
)

// freePort returns a local TCP port nobody listens on.
func freePort() int32 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

var _ = Describe("modelgate serve", Ordered, func() {
	var (
		cfg         *config.Configuration
		cancelFn    context.CancelFunc
		done        <-chan struct{}
		addr        string
		firstSerial *big.Int
		inFlight    = make(chan struct{})
		// answer lets the in-flight review answer, closing release.
		release = make(chan struct{})
		answer  = sync.OnceFunc(func() { close(release) })
	)

	BeforeAll(func() {
		cfg = config.New()
		cfg.Webhook.Host = "127.0.0.1"
		cfg.Webhook.Port = freePort()
		certDir, err := os.MkdirTemp("", "modelgate-serve-certs-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, certDir)
		cfg.Webhook.CertDir = certDir
		firstSerial = writeServingCert(cfg.Webhook.CertDir)
		cfg.Metrics.BindAddress = fmt.Sprintf("127.0.0.1:%d", freePort())
		cfg.Health.BindAddress = fmt.Sprintf("127.0.0.1:%d", freePort())
		cfg.ShutdownGracePeriod.Duration = 10 * time.Second
		cfg.DrainPeriod.Duration = 3 * time.Second
		addr = net.JoinHostPort(cfg.Webhook.Host, strconv.Itoa(int(cfg.Webhook.Port)))

		mgr, err := webhook.NewManager(adminCfg, cfg)
		Expect(err).NotTo(HaveOccurred())
		// A review that answers when the spec says so, to be caught by the
		// shutdown.
		mgr.GetWebhookServer().Register("/slow", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			close(inFlight)
			<-release
			_, _ = io.WriteString(w, "finished")
		}))
		mgr.GetWebhookServer().Register("/ping", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "pong")
		}))
		cancelFn, done = runManager(mgr)
	})

	// Whatever specs ran, stop this manager before the suite stops the API
	// server (the shutdown spec may already have stopped it).
	AfterAll(func() {
		answer()
		cancelFn()
		Eventually(done).WithTimeout(15 * time.Second).Should(BeClosed())
	})

	It("becomes ready once it serves TLS and its namespace cache has synced", func() {
		Eventually(func() int { code, _ := readyz(cfg.Health.BindAddress); return code }).WithTimeout(20 * time.Second).Should(Equal(http.StatusOK))
		resp, err := http.Get("http://" + cfg.Health.BindAddress + "/healthz") //nolint:noctx // a test probe.
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
	})

	It("picks up a rotated serving certificate without a restart", func() {
		serving := func() (*big.Int, error) {
			conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
			if err != nil {
				return nil, err
			}
			defer conn.Close()
			return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
		}
		Expect(serving()).To(Equal(firstSerial))
		rotated := writeServingCert(cfg.Webhook.CertDir)
		Eventually(serving).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Equal(rotated))
	})

	It("refuses TLS older than 1.2", func() {
		_, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11})
		Expect(err).To(HaveOccurred())
	})

	It("speaks HTTP/1.1 only, even to a client that offers HTTP/2", func() {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
		Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		Expect(conn.ConnectionState().NegotiatedProtocol).To(Equal("http/1.1"))
		Expect(conn.ConnectionState().Version).To(BeNumerically(">=", tls.VersionTLS12))
	})

	It("drains when it is stopped: keeps answering, closing each connection, with /readyz failing; then lets an in-flight review finish", func() {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		// ping answers on a connection of its own; close is whether the
		// server asked to close it (Connection: close).
		ping := func() (body string, closed bool, err error) {
			pc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			resp, err := pc.Post("https://"+addr+"/ping", "application/json", nil) //nolint:noctx // a test request.
			if err != nil {
				return "", false, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return string(b), resp.Close, err
		}
		probe := func() (int, string) { return readyz(cfg.Health.BindAddress) }
		// Before: kept-alive answers, and ready.
		body, closed, err := ping()
		Expect(err).NotTo(HaveOccurred())
		Expect(body).To(Equal("pong"))
		Expect(closed).To(BeFalse(), "a serving replica keeps connections alive")
		code, _ := probe()
		Expect(code).To(Equal(http.StatusOK))

		type result struct {
			body string
			err  error
		}
		got := make(chan result, 1)
		go func() {
			resp, err := c.Post("https://"+addr+"/slow", "application/json", nil) //nolint:noctx // a test request.
			if err != nil {
				got <- result{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			got <- result{body: string(b), err: err}
		}()
		Eventually(inFlight).WithTimeout(10 * time.Second).Should(BeClosed())
		stopped := time.Now()
		cancelFn()
		// Draining: not ready, and still answering new connections, each
		// answer closing its connection.
		Eventually(func() int { code, _ := probe(); return code }).WithTimeout(2*time.Second).Should(Equal(http.StatusInternalServerError), "controller-runtime answers a failing readyz check with 500")
		_, verbose := probe()
		Expect(verbose).To(ContainSubstring("[-]shutdown failed"))
		body, closed, err = ping()
		Expect(err).NotTo(HaveOccurred(), "a draining replica still answers")
		Expect(body).To(Equal("pong"))
		Expect(closed).To(BeTrue(), "a draining replica closes each connection after its answer")

		// The drain over, the server stops accepting connections, and
		// waits for the review still in flight (the shutdown grace period).
		Eventually(func() error {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
			}
			return err
		}).WithTimeout(15*time.Second).Should(HaveOccurred(), "still accepting connections after the drain period")
		Expect(time.Since(stopped)).To(BeNumerically(">=", cfg.DrainPeriod.Duration), "it stopped accepting before the drain period ended")
		answer()
		var r result
		Eventually(got).WithTimeout(15 * time.Second).Should(Receive(&r))
		Expect(r.err).NotTo(HaveOccurred())
		Expect(r.body).To(Equal("finished"))
		Eventually(done).WithTimeout(15 * time.Second).Should(BeClosed())
	})
})
