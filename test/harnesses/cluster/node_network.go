package cluster

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/vishvananda/netlink"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The real node's Pod network. Each Pod gets a network namespace of its
// own and an address in PodCIDR on a bridge that exists only on this
// machine (the reference CNI plugins bridge and host-local, from
// hack/node): no uplink is attached to it, nothing is masqueraded or
// forwarded (the machine's ip_forward is left as it is), and a Pod's only
// routes are its subnet and ServiceCIDR through the bridge, so its traffic
// reaches the node's other Pods and the host, and nothing else.
//
// The host holds two addresses on the bridge: NodeGateway, where a server
// of the host listens to be reached from Pods (the model stores the
// loaders read), and the kubernetes Service's cluster IP, where
// kube-apiserver listens on port 443: a Pod's in-cluster client
// (KUBERNETES_SERVICE_HOST and _PORT, which the kubelet sets from that
// Service) reaches the API server without kube-proxy, and the API
// server's certificate names that address. There is no kube-proxy: other
// Services' cluster IPs lead nowhere, and kube-apiserver calls a Service
// (a webhook, a conversion) at its endpoints (--enable-aggregator-routing),
// the Pods' own addresses, as the host reaches any Pod.
const (
	// PodCIDR holds the real node's Pods' addresses.
	PodCIDR = "10.250.0.0/24"
	// NodeGateway is the host's address on the Pod bridge, the Pods'
	// gateway: a server on the machine that Pods must reach listens there.
	NodeGateway = "10.250.0.1"
	// ServiceCIDR is the cluster's Service range when the real node runs
	// (kube-apiserver's --service-cluster-ip-range).
	ServiceCIDR = "10.96.0.0/24"
	// APIServerServiceIP is the kubernetes Service's cluster IP, the first
	// of ServiceCIDR, where kube-apiserver listens (port 443) when the
	// real node runs.
	APIServerServiceIP = "10.96.0.1"
	// podBridge is the bridge's name (at most 15 bytes).
	podBridge = "modelgate0"
	// podNetworkName is the CNI network's name; host-local keeps its
	// allocations in /var/lib/cni/networks/<name>.
	podNetworkName = "modelgate-pods"
)

// podNetworkConf is the node's one CNI network: the bridge, with
// host-local addresses in PodCIDR, the host as gateway, and a route to
// ServiceCIDR through it (the API server). No default route, no
// masquerade. containerd sets up each Pod's loopback itself, with the
// loopback plugin.
func podNetworkConf() string {
	q := strconv.Quote
	return `{
  "cniVersion": "1.0.0",
  "name": ` + q(podNetworkName) + `,
  "plugins": [{
    "type": "bridge",
    "bridge": ` + q(podBridge) + `,
    "isGateway": true,
    "isDefaultGateway": false,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": ` + q(PodCIDR) + `, "gateway": ` + q(NodeGateway) + `}]],
      "routes": [{"dst": ` + q(ServiceCIDR) + `, "gw": ` + q(NodeGateway) + `}]
    }
  }]
}
`
}

// checkPodNetwork checks that the Pod network's ranges are free on this
// machine: no address or route of another interface falls in PodCIDR or
// ServiceCIDR (a route the machine has to such an address would be
// shadowed by the bridge's). A bridge an earlier node left (a cluster
// killed before its Stop) does not count: setUpPodBridge replaces it.
func checkPodNetwork() error {
	ranges := mustCIDRs(PodCIDR, ServiceCIDR)
	bridge := -1 // the index of an earlier node's bridge, if any
	if l, err := netlink.LinkByName(podBridge); err == nil {
		bridge = l.Attrs().Index
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return &NodeUnavailableError{"cannot list the machine's addresses (" + err.Error() + ")", "the real node's Pod network needs netlink"}
	}
	for _, a := range addrs {
		for _, r := range ranges {
			if r.Contains(a.IP) && a.LinkIndex != bridge {
				return &NodeUnavailableError{"address " + a.IPNet.String() + " of this machine is in the real node's Pod network " + r.String(),
					"the real node's Pods and Services use " + PodCIDR + " and " + ServiceCIDR + "; free them, or use kwok's nodes only"}
			}
		}
	}
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return &NodeUnavailableError{"cannot list the machine's routes (" + err.Error() + ")", "the real node's Pod network needs netlink"}
	}
	for _, rt := range routes {
		if rt.Dst == nil || rt.LinkIndex == bridge {
			continue // the default route, or the bridge's own
		}
		for _, r := range ranges {
			if r.Contains(rt.Dst.IP) || rt.Dst.Contains(r.IP) && ones(rt.Dst) > 0 {
				return &NodeUnavailableError{"this machine routes " + rt.Dst.String() + ", which overlaps the real node's Pod network " + r.String(),
					"the real node's Pods and Services use " + PodCIDR + " and " + ServiceCIDR + "; free them, or use kwok's nodes only"}
			}
		}
	}
	return nil
}

// ones is a network's prefix length.
func ones(n *net.IPNet) int {
	o, _ := n.Mask.Size()
	return o
}

// mustCIDRs parses the package's own constant ranges.
func mustCIDRs(cidrs ...string) []*net.IPNet {
	out := make([]*net.IPNet, len(cidrs))
	for i, c := range cidrs {
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			panic(err)
		}
		out[i] = n
	}
	return out
}

// setUpPodBridge creates the bridge, up, with the host's two addresses:
// NodeGateway in PodCIDR and the API server's cluster IP. It is made
// before kube-apiserver starts (which listens on the second); the bridge
// plugin finds it and attaches each Pod's veth to it.
func setUpPodBridge() error {
	if err := removePodBridge(); err != nil {
		return err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: podBridge}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("creating the Pod bridge %s: %w", podBridge, err)
	}
	link, err := netlink.LinkByName(podBridge)
	if err != nil {
		return fmt.Errorf("finding the Pod bridge %s: %w", podBridge, err)
	}
	for _, a := range []string{NodeGateway + "/24", APIServerServiceIP + "/32"} {
		addr, err := netlink.ParseAddr(a)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", a, err)
		}
		if err := netlink.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("adding %s to the Pod bridge %s: %w", a, podBridge, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting the Pod bridge %s up: %w", podBridge, err)
	}
	return nil
}

// removePodBridge deletes the bridge, if there is one; the Pods' veths
// went with their network namespaces.
func removePodBridge() error {
	link, err := netlink.LinkByName(podBridge)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finding the Pod bridge %s: %w", podBridge, err)
	}
	if err := netlink.LinkDel(link); err != nil {
		return fmt.Errorf("deleting the Pod bridge %s: %w", podBridge, err)
	}
	return nil
}

// podNetworkLeftovers lists the bridge and any interface still attached
// to it.
func podNetworkLeftovers() []string {
	link, err := netlink.LinkByName(podBridge)
	if err != nil {
		return nil
	}
	out := []string{"network interface " + podBridge}
	links, _ := netlink.LinkList()
	for _, l := range links {
		if l.Attrs().MasterIndex == link.Attrs().Index {
			out = append(out, "network interface "+l.Attrs().Name+" on "+podBridge)
		}
	}
	return out
}

// configureAPIServerForPods makes kube-apiserver reachable from the Pods:
// it listens on the kubernetes Service's cluster IP, port 443, with a
// serving certificate for that address (envtest's names the address it
// listens on), and calls Services (webhooks, conversion) at their
// endpoints, there being no kube-proxy. ServiceAccount admission, which
// envtest turns off, is on: a Pod gets its service account's token and
// the API server's CA (kube-root-ca.crt) mounted, as in a cluster, so
// that an in-cluster client in a Pod (modelgate's chart) works; a Pod is
// refused until its namespace's default service account exists, which
// kube-controller-manager creates a moment after the namespace.
func configureAPIServerForPods(te *envtest.Environment) {
	api := te.ControlPlane.GetAPIServer()
	api.Address = APIServerServiceIP
	api.Port = "443"
	args := api.Configure()
	args.Set("service-cluster-ip-range", ServiceCIDR)
	args.Set("enable-aggregator-routing", "true")
	args.Disable("disable-admission-plugins")
}

// ListenForPods listens on a free port of NodeGateway: a server of the
// host there is reached by the real node's Pods (and by the host).
func ListenForPods() (net.Listener, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(NodeGateway, "0"))
	if err != nil {
		return nil, fmt.Errorf("listening on the real node's gateway %s: %w", NodeGateway, err)
	}
	return l, nil
}

// PodNetworkUp says whether the real node's Pod network is up on this
// machine: NodeGateway is one of its addresses (from the moment Start has
// prepared the real node, before kube-apiserver starts).
func PodNetworkUp() bool {
	gw := net.ParseIP(NodeGateway)
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(gw) {
			return true
		}
	}
	return false
}
