package modelgate.owner

deny contains "the workload must carry the modelgate.io/owner label" if input.workload.owner == ""

warn contains "the workload has no modelgate.io/team label" if input.workload.team == ""
