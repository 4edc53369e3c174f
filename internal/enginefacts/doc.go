// Package enginefacts is the table of what modelgate relies on in each
// serving engine (engines.yaml): per engine and release, the images its
// presets name, the command lines that start it, the flags and variables
// modelgate writes or reads, and the endpoints its probes check, each with
// its source in the engine's repository.
//
// Nothing in modelgate's serving path reads the table: the recogniser
// (mutators), the presets (controller/aiinference, mutators) and the
// stand-in engine (test/standins/engine) each keep their own code, and
// their tests hold them to this table. A flag that drifts in an engine's
// new release is changed here, with its source, and the tests then name
// every place that must follow.
package enginefacts
