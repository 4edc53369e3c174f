package acme.no_latest_tag_test

import data.acme.no_latest_tag

test_denies_latest if {
	no_latest_tag.deny == {`container "app" uses image "nginx:latest"; pin a version tag`} with input as {"workload": {"containers": [{"name": "app", "image": "nginx:latest"}]}}
}
