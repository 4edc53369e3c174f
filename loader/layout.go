package loader

import "github.com/modelgate/modelgate/internal/modeldir"

// Names Load keeps for itself in the destination directory.
const (
	// StateDir holds the manifest, the lock, checkpoints and partial
	// files (modeldir.StateDir).
	StateDir = modeldir.StateDir
	// ManifestFile, in StateDir, is written last: its presence says the
	// model is complete and verified.
	ManifestFile = "manifest.json"
	// HFCacheDir is the Hugging Face hub cache inside the destination
	// (modeldir.HFCacheDir: the mutators point HF_HUB_CACHE at it).
	HFCacheDir = modeldir.HFCacheDir
)
