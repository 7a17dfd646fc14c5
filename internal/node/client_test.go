package node

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
)

func TestClassifyReply(t *testing.T) {
	redirect := &partition.RedirectError{Partition: 1, Epoch: 3, WriteRegion: "west"}
	for _, tc := range []struct {
		name  string
		err   error
		write bool
		want  ReplyClass
	}{
		{"ok write", nil, true, ReplyOK},
		{"ok read", nil, false, ReplyOK},
		{"redirect", fmt.Errorf("wrapped: %w", redirect), true, ReplyRedirect},
		{"backpressure", partition.ErrBackpressure, true, ReplyRetry},
		{"lease expired", fmt.Errorf("p 1: %w", partition.ErrLeaseExpired), true, ReplyRetry},
		{"not ready", partition.ErrNotReady, true, ReplyRetry},
		{"failed read", errors.New("disk"), false, ReplyRetry},
		{"unknown write", errors.New("disk"), true, ReplyUnknown},
		// What partition answers a write whose ack it withheld when the
		// lease lapsed (withholdPending, withholdAcksWithoutLease): it
		// may still commit, so it must not be retried.
		{"withheld ack is unknown, not a lease retry", fmt.Errorf("%w: %w", partition.ErrLeaseExpired,
			&partition.UnknownOutcomeError{Partition: 1, Token: partition.Token{Epoch: 2, LSN: 7}, Epoch: 2, WriteRegion: "east"}), true, ReplyUnknown},
		{"commit timeout", partition.ErrUnknownOutcome, true, ReplyUnknown},
		{"withheld read is retried", fmt.Errorf("%w: %w", partition.ErrLeaseExpired, partition.ErrUnknownOutcome), false, ReplyRetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ClassifyReply(partition.Reply{Err: tc.err}, tc.write))
		})
	}
}
