package annotations

// isCommitHash reports whether s is a full git commit hash (40 lower-case
// hex digits).
func isCommitHash(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}
