package demo

// collect.go reads a run's releases back while the operator runs: it pairs
// what the operator published (its release hook) with the messages on the
// output topic, and prints each window once all its releases are read.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/segmentio/kafka-go"

	"github.com/dpstream/dpstream/operator"
	"github.com/dpstream/dpstream/schema"
)

// collector is the state of collect: the windows expected, what the
// operator published of each, and the releases read so far.
type collector struct {
	r         *run
	wins      []*Window // in order; the first done are complete
	byStart   map[int64]*Window
	published map[int64]*operator.Published
	seen      map[string]bool // release keys read
	done      int
	// opDone records that collect received the operator's exit.
	opDone bool
}

// newCollector expects the run's windows, with their true aggregates.
func newCollector(r *run, truth map[int64]map[string]*GroupTruth) *collector {
	c := &collector{r: r, wins: make([]*Window, r.o.Windows), byStart: map[int64]*Window{},
		published: map[int64]*operator.Published{}, seen: map[string]bool{}}
	for i := range c.wins {
		s := r.stream.WindowStart(i)
		c.wins[i] = &Window{Start: s, End: s + WindowSize.Milliseconds(), Truth: truth[s]}
		c.byStart[s] = c.wins[i]
	}
	return c
}

// collect waits until every window is published and read back, printing
// each in order; errc delivers the operator's exit.
func (c *collector) collect(ctx context.Context, errc <-chan error) error {
	r, res := c.r, c.r.res
	readCtx, stopRead := context.WithCancel(ctx)
	defer stopRead()
	var relc <-chan kafka.Message
	var readErr <-chan error
	for c.done < r.o.Windows {
		select {
		case <-r.notify:
			c.takePublished()
			if relc == nil {
				// The output topic exists once a window was published.
				relc, readErr = readTopic(readCtx, res.Brokers, res.OutputTopic)
			}
		case m := <-relc:
			if err := c.addRelease(m); err != nil {
				return err
			}
		case err := <-readErr:
			return fmt.Errorf("%w: reading %s: %v", ErrRun, res.OutputTopic, err)
		case err := <-errc:
			c.opDone = true
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("%w: the operator stopped before %d windows were published: %v", ErrRun, r.o.Windows, err)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w: only %d of %d windows were published within --timeout %v", ErrRun, c.done, r.o.Windows, r.o.Timeout)
			}
			return fmt.Errorf("%w: interrupted after %d of %d windows", ErrRun, c.done, r.o.Windows)
		}
		if err := c.emitComplete(); err != nil {
			return err
		}
	}
	return nil
}

// takePublished takes what the release hook queued: each window's
// publication, its latency, and the check of the demo's truth against the
// operator's exact aggregates.
func (c *collector) takePublished() {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.pubs {
		p := r.pubs[i]
		c.published[p.Window.Start] = &p
		if w := c.byStart[p.Window.Start]; w != nil {
			w.Latency = p.Latency
			r.res.Mismatches += compareTruth(w.Truth, &p)
		}
	}
	r.pubs = r.pubs[:0]
}

// addRelease decodes one output message and files it under its window.
func (c *collector) addRelease(m kafka.Message) error {
	rel, err := schema.DecodeRelease(m.Value)
	if err != nil {
		return fmt.Errorf("%w: output message at offset %d does not decode: %v", ErrRun, m.Offset, err)
	}
	if c.seen[rel.Key()] {
		return nil // a re-published release (identical bytes by design)
	}
	c.seen[rel.Key()] = true
	if w := c.byStart[rel.WindowStart]; w != nil {
		w.Releases = append(w.Releases, rel)
	}
	return nil
}

// emitComplete prints, in order, the next windows whose releases are all
// read (as many as the operator published for them, the skipped included)
// and adds them to the result.
func (c *collector) emitComplete() error {
	r, res := c.r, c.r.res
	for c.done < r.o.Windows {
		w := c.wins[c.done]
		p := c.published[w.Start]
		if p == nil || len(w.Releases) < len(p.Releases)+p.Skipped {
			break
		}
		sortReleases(w.Releases)
		w.Running = runningTruths(append(slices.Clone(res.Windows), *w))
		res.Windows = append(res.Windows, *w)
		c.done++
		if r.o.JSON {
			if err := writeJSON(r.stdout, w); err != nil {
				return err
			}
		} else {
			printWindow(r.text, w, c.done, r.o.Windows)
		}
	}
	return nil
}
