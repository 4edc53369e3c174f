// Package modeldir names the parts of a model directory that both sides of
// it rely on: the loader (loader/) writes them, and the mutators point the
// serving container at them.
package modeldir

// HFCacheDir is the Hugging Face hub cache inside a model directory (an
// hf:// model's models--org--name lives here); the serving container's
// HF_HUB_CACHE points at it. It mirrors the default
// ~/.cache/huggingface/hub, so HF_HOME=<dir>/.cache/huggingface finds it
// too.
const HFCacheDir = ".cache/huggingface/hub"

// StateDir is where the loader keeps its own state in a model directory
// (its manifest, lock, checkpoints and partial files), beside the model:
// an engine that takes every directory of the model's for something of
// its own (Triton's model repository) sees it.
const StateDir = ".modelgate"
