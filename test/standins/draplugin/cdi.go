package draplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// cdiKind is the CDI devices' kind, vendor/class.
const cdiKind = CDIVendor + "/" + CDIClass

// cdiDeviceName is the CDI device of a claim's device: unique to the claim
// (containerd may cache specs; a name is never reused for another claim).
func cdiDeviceName(claim types.UID, device string) string { return string(claim) + "-" + device }

// cdiDeviceID is the fully qualified CDI device name the kubelet hands to
// containerd.
func cdiDeviceID(claim types.UID, device string) string {
	return cdiKind + "=" + cdiDeviceName(claim, device)
}

// specFileName is the CDI spec file of a claim: the kind with '/' made
// '-', and the claim's UID.
func specFileName(claim types.UID) string {
	return CDIVendor + "-" + CDIClass + "_" + string(claim) + ".json"
}

// cdiSpec is the CDI spec of a preparation: one device per GPU, each
// setting NVIDIA_VISIBLE_DEVICES to the UUIDs of its request's GPUs and
// MODELGATE_DRA_CLAIM to the claim; its version is the lowest that holds
// what it uses.
func cdiSpec(p Preparation) (cdispec.Spec, error) {
	uuids := map[string][]string{}
	for _, d := range p.Devices {
		uuids[d.Request] = append(uuids[d.Request], d.UUID)
	}
	spec := cdispec.Spec{Kind: cdiKind, Devices: make([]cdispec.Device, 0, len(p.Devices))}
	for _, d := range p.Devices {
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name: cdiDeviceName(p.UID, d.Device),
			ContainerEdits: cdispec.ContainerEdits{Env: []string{
				VisibleDevicesEnv + "=" + strings.Join(uuids[d.Request], ","),
				ClaimEnv + "=" + p.Claim.String(),
			}},
		})
	}
	v, err := cdispec.MinimumRequiredVersion(&spec)
	if err != nil {
		return cdispec.Spec{}, fmt.Errorf("the CDI version of claim %s's spec: %w", p.Claim, err)
	}
	spec.Version = v
	return spec, nil
}

// writeSpec writes a spec into dir as file, atomically: containerd reads
// the folder when a container starts, and must never see half a file. The
// temporary file's name does not end in .json, so CDI skips it.
func writeSpec(dir, file string, spec cdispec.Spec) error {
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the CDI spec %s: %w", file, err)
	}
	tmp, err := os.CreateTemp(dir, "."+file+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing the CDI spec %s: %w", file, err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing the CDI spec %s: %w", file, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, file)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing the CDI spec %s: %w", file, err)
	}
	return nil
}

// removeSpec removes a spec file; one that is not there is no error.
func removeSpec(dir, file string) error {
	if err := os.Remove(filepath.Join(dir, file)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the CDI spec %s: %w", file, err)
	}
	return nil
}
