# no-latest-tag: images must name a tag other than latest.
package acme.no_latest_tag

deny contains msg if {
	some c in input.workload.containers
	endswith(c.image, ":latest")
	msg := sprintf("container %q uses image %q; pin a version tag", [c.name, c.image])
}
