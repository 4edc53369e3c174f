package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/internal/seal"
)

// The key sealing modelgate's reserved metadata lives in one Secret that
// every replica reads at start; the first replica to find none makes it.
// Creating cannot be limited to one name, so create is granted on the
// namespace's Secrets; reading only on this one.
// +kubebuilder:rbac:groups="",namespace=modelgate-system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=modelgate-system,resources=secrets,verbs=get,resourceNames=modelgate-record-key

const (
	// RecordKeySecret names the Secret, in modelgate's namespace, holding
	// the key that seals modelgate's reserved metadata (internal/seal).
	RecordKeySecret = "modelgate-record-key"
	// RecordKeyField is the Secret's data key holding the key.
	RecordKeyField = "key"
	// recordKeyWait bounds how long a replica tries to read or make the
	// key before it gives up starting.
	recordKeyWait = 30 * time.Second
)

// LoadRecordKey reads the sealing key from the RecordKeySecret in
// namespace, creating the Secret with a new random key when there is none.
// Replicas starting together agree on one key: whoever loses the create
// reads the winner's.
func LoadRecordKey(ctx context.Context, c client.Client, namespace string) (*seal.Key, error) {
	name := client.ObjectKey{Namespace: namespace, Name: RecordKeySecret}
	for attempt := 0; ; attempt++ {
		var s corev1.Secret
		err := c.Get(ctx, name, &s)
		if err == nil {
			k, err := seal.New(s.Data[RecordKeyField])
			if err != nil {
				return nil, fmt.Errorf("secret %s data[%s]: %w; delete the Secret to have modelgate make a new key", name, RecordKeyField, err)
			}
			return k, nil
		}
		if !apierrors.IsNotFound(err) || attempt > 0 {
			return nil, fmt.Errorf("reading the record key Secret %s: %w", name, err)
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: RecordKeySecret,
				Labels: map[string]string{"app.kubernetes.io/name": "modelgate", "app.kubernetes.io/component": "record-key"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{RecordKeyField: seal.Generate()},
		}
		switch err := c.Create(ctx, &s); {
		case err == nil:
			return seal.New(s.Data[RecordKeyField])
		case apierrors.IsAlreadyExists(err):
			continue // another replica made it first: read theirs
		default:
			return nil, fmt.Errorf("creating the record key Secret %s: %w", name, err)
		}
	}
}

// loadRecordKey is LoadRecordKey for NewManager, with a client of its own
// (the manager's cache is not running yet) and a deadline.
func loadRecordKey(c client.Client, namespace string) (*seal.Key, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recordKeyWait)
	defer cancel()
	k, err := LoadRecordKey(ctx, c, namespace)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w (after %s)", err, recordKeyWait)
	}
	return k, err
}
