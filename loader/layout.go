package loader

// Names Load keeps for itself in the destination directory.
const (
	// StateDir holds the manifest, the lock, checkpoints and partial
	// files.
	StateDir = ".modelgate"
	// ManifestFile, in StateDir, is written last: its presence says the
	// model is complete and verified.
	ManifestFile = "manifest.json"
	// HFCacheDir is the Hugging Face hub cache inside the destination
	// (an hf:// model's models--org--name lives here); the serving
	// container's HF_HUB_CACHE points at it. It mirrors the default
	// ~/.cache/huggingface/hub, so HF_HOME=<dest>/.cache/huggingface
	// finds it too.
	HFCacheDir = ".cache/huggingface/hub"
)
