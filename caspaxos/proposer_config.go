package caspaxos

import (
	"time"

	"github.com/fmnode/fmnode/guard"
	"github.com/fmnode/fmnode/quorum"
)

// ProposerConfig configures a Proposer. Defaults follow the paper's
// production knobs (phase 1 500 ms, phase 2 1 s, 5 attempts, base 100 ms).
type ProposerConfig struct {
	// ID is the proposer's id; it breaks ballot ties, so it must be unique
	// among proposers and across restarts: a restarted proposer that
	// reused its id could reuse a ballot with another value. Drivers give
	// each incarnation a fresh id (or persist the ballot counter).
	ID NodeID
	// Age is the proposer's starting age. Acceptors fence proposers whose
	// age is below their floor (raised by register GC); a fenced proposer
	// adopts the floor it is told.
	Age uint64
	// Quorum is the acceptor configuration.
	Quorum quorum.Config

	Phase1Timeout time.Duration
	Phase2Timeout time.Duration
	// MaxAttempts bounds the rounds of one proposal before it reports
	// ErrNoQuorum (or ErrUnknownOutcome).
	MaxAttempts int

	Backoff     BackoffKind
	BackoffBase time.Duration
	// BackoffMax caps one backoff delay.
	BackoffMax time.Duration
	// EMAAlpha is the weight of a new phase-2 sample in the adaptive EMA.
	EMAAlpha float64

	// DisableFastPath turns off the one-round-trip path (the accept
	// piggybacks the next promise and the proposer caches the value).
	DisableFastPath bool
	// FastPathTTL bounds how long a cached promise is used: an old one has
	// most likely been overtaken by another proposer, and trying it costs
	// a refused round.
	FastPathTTL time.Duration
	// FastPathRisk bounds the chance of betting on a stale cached promise
	// when other proposers write the key too: the cache is used only while
	// its age is at most this fraction of the time the key was quiet (no
	// round by another proposer) before it was cached. A key no other
	// proposer was seen on uses the cache up to FastPathTTL.
	FastPathRisk float64

	// Turns, when positive, makes proposers that contend for a key take
	// turns instead of colliding: time is cut into a cycle of Turns turns
	// of TurnLength each (on the clock the driver gives, which must be
	// comparable across proposers), and a proposer whose key showed a
	// round of another proposer within the last TurnMemory starts a new
	// proposal only inside its own turn, TurnIndex, and only while a round
	// (twice the adaptive EMA + sigma) still fits in it. A proposer alone
	// on its key never waits. Off (0) by default: waiting for a turn costs
	// up to Turns*TurnLength of latency on every contended proposal.
	Turns      int
	TurnIndex  int
	TurnLength time.Duration
	TurnMemory time.Duration

	// PaceMemory, when positive and the backoff is adaptive (and turns are
	// off), paces first attempts: a proposal on a key where a rival round
	// started during the previous proposal waits, before its first attempt,
	// until PaceGap after that rival's start offset (pacing.go). The delay
	// is forgotten PaceMemory after it was learned. 0 turns pacing off.
	PaceMemory time.Duration
	// PaceGapMin is the least gap between a rival's start and this
	// proposer's paced first attempt; set it at or above the slowest
	// proposer's round (prepare + accept), which this one cannot observe.
	// The gap, like every wait, is capped by BackoffMax.
	PaceGapMin time.Duration
	// MaxPacedKeys bounds the keys with a remembered pace.
	MaxPacedKeys int

	// Forward, with the adaptive backoff (and turns off), serialises a
	// shared key's writers before they send (forward.go): a proposer that
	// saw another proposer on the key within ForwardMemory, or is told of
	// one (ForwardWriters), sends its change, if it is a
	// ForwardableChange, to the key's leader (the smallest writer id it
	// knows) instead of proposing it, and proposes it itself
	// only if the leader does not answer within max(ForwardTimeoutMin,
	// 8 * (EMA + sigma)) or cannot take it. ChangeCodec decodes the
	// changes others forward. The driver must carry Forward messages
	// (ReadyForwards, StepForward). Off by default.
	Forward           bool
	ChangeCodec       ChangeCodec
	ForwardMemory     time.Duration
	ForwardTimeoutMin time.Duration
	// MaxForwardKeys bounds the keys with a leader hint; MaxForwardHops
	// the redirects ("not me, try X") one forward follows.
	MaxForwardKeys int
	MaxForwardHops int
	// ForwardWriters, with Forward on, names a key's candidate writers
	// before this proposer has seen any of them (in the product: the
	// partition's replicas, from the partition layout, less those the
	// membership reports down). A key it names another writer for counts
	// as shared from its first proposal: the smallest id among those
	// writers, this proposer and the hints (forward.go), less those whose
	// forwards timed out within ForwardMemory, leads, and the others
	// forward to it, so the first events do not collide. It is called on
	// every forwardable proposal and every forward received, so it must
	// be cheap, deterministic and non-blocking; the proposer reads the
	// returned slice during the call only, at most MaxKnownWriters ids of
	// it, and skips zero and its own id. nil: a key's writers are known
	// only once seen.
	ForwardWriters func(key string) []NodeID

	// MaxInFlight bounds the keys with an active proposal.
	MaxInFlight int
	// MaxQueuePerKey bounds proposals waiting behind the active one of a key.
	MaxQueuePerKey int
	// MaxBatchItems bounds the items of one outgoing message.
	MaxBatchItems int
	// MaxCachedKeys bounds the fast-path cache (least recently used go first).
	MaxCachedKeys int
	// MaxValueBytes bounds a value a change may produce.
	MaxValueBytes int

	// Guards counts the proposer's reject paths (NAKed rounds, timeouts,
	// proposals ended without a quorum or in doubt, refusals at its
	// bounds); nil counts nothing.
	Guards guard.Counter
	// Flow is the flow control of rounds (flow.go); the zero value is off.
	Flow FlowConfig
}

// Default bounds and knobs.
const (
	DefaultPhase1Timeout  = 500 * time.Millisecond
	DefaultPhase2Timeout  = time.Second
	DefaultMaxAttempts    = 5
	DefaultBackoffBase    = 100 * time.Millisecond
	DefaultBackoffMax     = 10 * time.Second
	DefaultEMAAlpha       = 0.2
	DefaultMaxInFlight    = 65536
	DefaultMaxQueuePerKey = 64
	DefaultMaxBatchItems  = 512
	DefaultMaxCachedKeys  = 1 << 20
	DefaultFastPathTTL    = 5 * time.Second
	DefaultFastPathRisk   = 0.05
	DefaultTurnLength     = 250 * time.Millisecond
	DefaultTurnMemory     = time.Minute
	DefaultPaceMemory     = 2 * time.Minute
	DefaultPaceGapMin     = 115 * time.Millisecond
	DefaultMaxPacedKeys   = 65536
	// Forwarding defaults (off unless Forward is set).
	DefaultForwardMemory     = 2 * time.Minute
	DefaultForwardTimeoutMin = 500 * time.Millisecond
	DefaultMaxForwardKeys    = 65536
	DefaultMaxForwardHops    = 2
	// MaxKnownWriters bounds the ids of one ForwardWriters answer that
	// count (a partition's replicas are a handful).
	MaxKnownWriters = 64
	// MaxTurns bounds the turn cycle.
	MaxTurns = 1024
)

// DefaultProposerConfig returns the paper's defaults for proposer id over q.
func DefaultProposerConfig(id NodeID, q quorum.Config) ProposerConfig {
	return ProposerConfig{
		ID:             id,
		Quorum:         q,
		Phase1Timeout:  DefaultPhase1Timeout,
		Phase2Timeout:  DefaultPhase2Timeout,
		MaxAttempts:    DefaultMaxAttempts,
		Backoff:        BackoffAdaptive,
		BackoffBase:    DefaultBackoffBase,
		BackoffMax:     DefaultBackoffMax,
		EMAAlpha:       DefaultEMAAlpha,
		MaxInFlight:    DefaultMaxInFlight,
		MaxQueuePerKey: DefaultMaxQueuePerKey,
		MaxBatchItems:  DefaultMaxBatchItems,
		MaxCachedKeys:  DefaultMaxCachedKeys,
		MaxValueBytes:  MaxValueBytes,
		FastPathTTL:    DefaultFastPathTTL,
		FastPathRisk:   DefaultFastPathRisk,
		TurnLength:     DefaultTurnLength,
		TurnMemory:     DefaultTurnMemory,
		PaceMemory:     DefaultPaceMemory,
		PaceGapMin:     DefaultPaceGapMin,
		MaxPacedKeys:   DefaultMaxPacedKeys,

		ForwardMemory:     DefaultForwardMemory,
		ForwardTimeoutMin: DefaultForwardTimeoutMin,
		MaxForwardKeys:    DefaultMaxForwardKeys,
		MaxForwardHops:    DefaultMaxForwardHops,
	}
}

// Validate checks every field and the relations between them.
func (c ProposerConfig) Validate() error {
	switch {
	case c.ID == 0:
		return configErr("ID", "must be non-zero (zero is the null ballot's owner)")
	case c.Phase1Timeout <= 0:
		return configErr("Phase1Timeout", "must be positive, got %v", c.Phase1Timeout)
	case c.Phase2Timeout <= 0:
		return configErr("Phase2Timeout", "must be positive, got %v", c.Phase2Timeout)
	case c.MaxAttempts < 1 || c.MaxAttempts > 64:
		return configErr("MaxAttempts", "must be in [1, 64], got %d", c.MaxAttempts)
	case c.Backoff > BackoffNone:
		return configErr("Backoff", "unknown kind %d", c.Backoff)
	case c.Backoff != BackoffNone && c.BackoffBase <= 0:
		return configErr("BackoffBase", "must be positive, got %v", c.BackoffBase)
	case c.Backoff != BackoffNone && c.BackoffMax < c.BackoffBase:
		return configErr("BackoffMax", "%v is below BackoffBase %v", c.BackoffMax, c.BackoffBase)
	case c.Backoff == BackoffAdaptive && (c.EMAAlpha <= 0 || c.EMAAlpha > 1):
		return configErr("EMAAlpha", "must be in (0, 1], got %v", c.EMAAlpha)
	case c.MaxInFlight < 1:
		return configErr("MaxInFlight", "must be at least 1, got %d", c.MaxInFlight)
	case c.MaxQueuePerKey < 0:
		return configErr("MaxQueuePerKey", "must not be negative, got %d", c.MaxQueuePerKey)
	case c.MaxBatchItems < 1:
		return configErr("MaxBatchItems", "must be at least 1, got %d", c.MaxBatchItems)
	case c.MaxCachedKeys < 0:
		return configErr("MaxCachedKeys", "must not be negative, got %d", c.MaxCachedKeys)
	case !c.DisableFastPath && c.FastPathTTL <= 0:
		return configErr("FastPathTTL", "must be positive with the fast path on, got %v", c.FastPathTTL)
	case !c.DisableFastPath && !(c.FastPathRisk > 0 && c.FastPathRisk <= 1):
		return configErr("FastPathRisk", "must be in (0, 1] with the fast path on, got %v", c.FastPathRisk)
	case c.Turns < 0 || c.Turns > MaxTurns:
		return configErr("Turns", "must be in [0, %d], got %d", MaxTurns, c.Turns)
	case c.Turns > 0 && (c.TurnIndex < 0 || c.TurnIndex >= c.Turns):
		return configErr("TurnIndex", "must be in [0, Turns=%d), got %d", c.Turns, c.TurnIndex)
	case c.Turns > 0 && c.TurnLength <= 0:
		return configErr("TurnLength", "must be positive with turns on, got %v", c.TurnLength)
	case c.Turns > 0 && c.TurnMemory <= 0:
		return configErr("TurnMemory", "must be positive with turns on, got %v", c.TurnMemory)
	case c.PaceMemory < 0:
		return configErr("PaceMemory", "must not be negative, got %v", c.PaceMemory)
	case c.pacing() && c.PaceGapMin <= 0:
		return configErr("PaceGapMin", "must be positive with pacing on, got %v", c.PaceGapMin)
	case c.pacing() && c.MaxPacedKeys < 1:
		return configErr("MaxPacedKeys", "must be at least 1 with pacing on, got %d", c.MaxPacedKeys)
	case c.forwarding() && c.ChangeCodec == nil:
		return configErr("ChangeCodec", "must be set with Forward on")
	case c.forwarding() && c.ForwardMemory <= 0:
		return configErr("ForwardMemory", "must be positive with Forward on, got %v", c.ForwardMemory)
	case c.forwarding() && c.ForwardTimeoutMin <= 0:
		return configErr("ForwardTimeoutMin", "must be positive with Forward on, got %v", c.ForwardTimeoutMin)
	case c.forwarding() && c.MaxForwardKeys < 1:
		return configErr("MaxForwardKeys", "must be at least 1 with Forward on, got %d", c.MaxForwardKeys)
	case c.ForwardWriters != nil && !c.Forward:
		return configErr("ForwardWriters", "needs Forward on")
	case c.MaxForwardHops < 0 || c.MaxForwardHops > 8:
		return configErr("MaxForwardHops", "must be in [0, 8], got %d", c.MaxForwardHops)
	case c.MaxValueBytes < 1 || c.MaxValueBytes > MaxValueBytes:
		return configErr("MaxValueBytes", "must be in [1, %d], got %d", MaxValueBytes, c.MaxValueBytes)
	}
	if err := c.Quorum.Validate(); err != nil {
		return configErr("Quorum", "%v", err)
	}
	return c.Flow.validate(c)
}

// pacing reports whether first attempts are paced: adaptive backoff,
// PaceMemory set, and no turns (turns order contending proposers already).
func (c ProposerConfig) pacing() bool {
	return c.Backoff == BackoffAdaptive && c.PaceMemory > 0 && c.Turns == 0
}

// forwarding reports whether changes are forwarded to a key's leader:
// Forward set, adaptive backoff, no turns (forward.go).
func (c ProposerConfig) forwarding() bool {
	return c.Forward && c.Backoff == BackoffAdaptive && c.Turns == 0
}
