package configserver

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// nackLogEvery bounds how often one stream's NACKs are logged: a pusher that NACKs in a
// storm is recorded (GetStatus, metrics) at every NACK, but its log says the first and then
// how many followed.
const nackLogEvery = time.Second

// peer is what the server knows of one stream's pusher beyond its status: which versions
// the stream was sent, so that an answer about another one is refused, and how its NACKs
// are logged.
type peer struct {
	mu        sync.Mutex
	cur, prev sentRange // the epoch sent last, and the one before (an answer may cross a marker)
	nacks     nackLog
}

// sentRange is the versions of one epoch a stream was sent: from first to last (it may
// have skipped some in between), last with its hash.
type sentRange struct {
	epoch       string
	first, last uint64
	lastHash    string
}

// sent notes that the stream is about to be sent m, a config, a delta or the start of a
// chunked config (before it is: the answer may come
// before Send returns).
func (p *peer) sent(m *configv1.StreamConfigResponse) {
	c := m.GetConfig()
	if d := m.GetDelta(); d != nil {
		c = contract.VersionOf(d)
	}
	if st := m.GetConfigStart(); st != nil {
		c = &configv1.Config{Epoch: st.GetEpoch(), Version: st.GetVersion(), Hash: st.GetHash()}
	}
	if c == nil {
		return
	}
	epoch, version, hash := c.GetEpoch(), c.GetVersion(), c.GetHash()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur.epoch != epoch {
		p.prev, p.cur = p.cur, sentRange{epoch: epoch, first: version}
	}
	p.cur.last, p.cur.lastHash = version, hash
}

// check refuses an ACK or NACK of a version the stream was never sent: of an epoch it was
// not sent, outside the versions it was sent, or the last version sent with another hash.
func (p *peer) check(what string, ref *configv1.ConfigRef) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range []sentRange{p.cur, p.prev} {
		if r.epoch == "" || r.epoch != ref.GetEpoch() {
			continue
		}
		if ref.GetVersion() < r.first || ref.GetVersion() > r.last {
			break
		}
		if ref.GetVersion() == r.last && ref.GetHash() != "" && ref.GetHash() != r.lastHash {
			return status.Errorf(codes.InvalidArgument, "%s of version %s/%d with hash %.12s; that version was sent with hash %.12s",
				what, ref.GetEpoch(), ref.GetVersion(), ref.GetHash(), r.lastHash)
		}
		return nil
	}
	if p.cur.epoch == "" {
		return status.Errorf(codes.InvalidArgument, "%s of version %s/%d; this stream was sent no version yet", what, ref.GetEpoch(), ref.GetVersion())
	}
	return status.Errorf(codes.InvalidArgument, "%s of version %s/%d, which this stream was never sent (it was sent %s/%d..%d)",
		what, ref.GetEpoch(), ref.GetVersion(), p.cur.epoch, p.cur.first, p.cur.last)
}

// nackLog rate-limits the log of one stream's NACKs.
type nackLog struct {
	logged     bool
	at         time.Time
	suppressed int
}

// next reports whether a NACK at now is logged and, when it is, how many were not since
// the last one logged.
func (p *peer) nackLogged(now time.Time) (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nacks.next(now)
}

func (l *nackLog) next(now time.Time) (bool, int) {
	if l.logged && now.Sub(l.at) < nackLogEvery {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.logged, l.at, l.suppressed = true, now, 0
	return true, n
}

// endPeer logs, when a stream ends, the NACKs its log left out.
func (s *Server) endPeer(log hclog.Logger, p *peer) {
	p.mu.Lock()
	n := p.nacks.suppressed
	p.nacks.suppressed = 0
	p.mu.Unlock()
	if n > 0 {
		log.Warn("more NACKs on this stream than were logged", "not_logged", n)
	}
}
