package peer

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// secure runs the TLS handshake and the SASL exchange of a new connection, within
// ctx (or DialTimeout, whichever ends first).
func (c *Conn) secure(ctx context.Context, nc net.Conn) (net.Conn, error) {
	if c.opts.Security.TLS == nil && c.opts.Security.SASL == nil {
		return nc, nil
	}
	deadline := time.Now().Add(c.opts.DialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := nc.SetDeadline(deadline); err != nil {
		nc.Close()
		return nil, err
	}
	if c.opts.Security.TLS != nil {
		cfg := c.opts.Security.TLS
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(c.addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
	}
	if c.opts.Security.SASL != nil {
		if err := c.authenticate(ctx, nc); err != nil {
			nc.Close()
			return nil, fmt.Errorf("SASL %s: %w", c.opts.Security.SASL.Name(), err)
		}
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

// authenticate runs SaslHandshake v1 and SaslAuthenticate v1 until the mechanism is
// done.
func (c *Conn) authenticate(ctx context.Context, nc net.Conn) error {
	mech := c.opts.Security.SASL
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mech.Name()
	resp, err := c.roundTrip(nc, hs, 0)
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return kerr.ErrorForCode(code)
	}
	session, token, err := mech.Authenticate(ctx, c.addr)
	if err != nil {
		return err
	}
	for corr := int32(1); ; corr++ {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(1)
		req.SASLAuthBytes = token
		resp, err := c.roundTrip(nc, req, corr)
		if err != nil {
			return err
		}
		ar := resp.(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != 0 {
			msg := ""
			if ar.ErrorMessage != nil {
				msg = *ar.ErrorMessage
			}
			return fmt.Errorf("%w: %s", kerr.ErrorForCode(ar.ErrorCode), msg)
		}
		done, next, err := session.Challenge(ar.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if corr > 10 {
			return errors.New("the exchange does not end")
		}
		token = next
	}
}

// roundTrip writes one request and reads its response, before the connection's
// reader runs.
func (c *Conn) roundTrip(nc net.Conn, req kmsg.Request, corr int32) (kmsg.Response, error) {
	if _, err := nc.Write(c.fmt.AppendRequest(nil, req, corr)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 1<<20 {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(nc, frame); err != nil {
		return nil, err
	}
	return decodeResponse(&pending{req: req, corr: corr}, frame)
}
