package deviceplugin

// keeperState is what the plugin knows of its own socket and registration.
type keeperState struct {
	// serving is the socket the plugin serves on; zero when not serving.
	serving fileID
	// registeredWith is the kubelet socket through which the plugin
	// registered; zero when not registered.
	registeredWith fileID
}

// observation is what the plugin sees in the device-plugin directory.
type observation struct {
	own     fileID // the file at the plugin's socket path
	kubelet fileID // the file at kubelet.sock
}

// plan is what the plugin should do about an observation, in this order.
type plan struct {
	// relisten: the plugin is not serving, or its socket has gone or been
	// replaced (the kubelet wipes the directory when it starts), so serve
	// on a new one.
	relisten bool
	// unregister: the registration is lost, because the kubelet socket is
	// gone or new (a kubelet that restarted forgot it), or because the
	// socket the kubelet dialled is gone.
	unregister bool
	// register: the plugin is (now) not registered and a kubelet socket is
	// there to register through.
	register bool
}

// decide says what to do when the plugin in state s sees o.
func decide(s keeperState, o observation) plan {
	var p plan
	p.relisten = s.serving.absent() || o.own != s.serving
	registered := !s.registeredWith.absent()
	if registered && (p.relisten || o.kubelet != s.registeredWith) {
		p.unregister = true
		registered = false
	}
	p.register = !registered && !o.kubelet.absent()
	return p
}
