package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"k3/engine"
	"k3/engine/chat"
	"k3/ui/remote"
)

// Where the model runs (Settings.Backend).
const (
	BackendLocal  = ""       // the engine on this machine
	BackendServer = "server" // an OpenAI-compatible server (Settings.ServerURL)
)

// NewChatFor returns the chat engine the settings ask for.
func NewChatFor(s Settings) (ChatEngine, error) {
	if s.Backend == BackendServer {
		return NewRemoteChat(s)
	}
	return NewEngineChat(s), nil
}

// remoteChat is the app's chat engine on a server: the conversation is
// sent whole each turn (the server keeps its own state).
type remoteChat struct {
	c    *remote.Client
	info ModelInfo
}

// NewRemoteChat returns a chat engine on the server the settings name.
func NewRemoteChat(s Settings) (ChatEngine, error) {
	c, err := remote.New(s.ServerURL, s.ServerKey, s.ServerModel)
	if err != nil {
		return nil, err
	}
	return &remoteChat{c: c}, nil
}

func (r *remoteChat) Open(ctx context.Context, on func(engine.Event)) (ModelInfo, error) {
	if r.info.Name != "" {
		return r.info, nil
	}
	phase(on, "asking the server which models it serves")
	id, err := r.c.Resolve(ctx)
	if err != nil {
		return ModelInfo{}, serverErr(r.c.BaseURL, err)
	}
	host := r.c.BaseURL
	if u, err := url.Parse(r.c.BaseURL); err == nil {
		host = u.Host
	}
	r.info = ModelInfo{Name: id + " on " + host, Remote: true, Plan: "runs on the server at " + r.c.BaseURL + ": this machine's memory gauges do not apply"}
	phase(on, "ready")
	return r.info, nil
}

func (r *remoteChat) Turn(ctx context.Context, history []chat.Message, opt chat.Options, on func(engine.Event)) (Reply, error) {
	clock := newThinkClock(&on)
	if _, err := r.Open(ctx, on); err != nil {
		return Reply{}, err
	}
	if len(history) == 0 || history[len(history)-1].Role != "user" {
		return Reply{}, errors.New("the conversation must end with your message")
	}
	res, err := r.c.Turn(ctx, history, opt, on)
	err = serverErr(r.c.BaseURL, err)
	if res == nil {
		return Reply{}, err
	}
	if err == nil && res.Message.Cut != chat.CutStopped {
		done := fmt.Sprintf("the server wrote %d deltas", res.Deltas)
		if res.Usage != nil {
			done = fmt.Sprintf("the server wrote %d tokens", res.Usage.CompletionTokens)
		}
		if res.TokensPerSecond > 0 {
			done += fmt.Sprintf(", %.1f tokens/s after %.2f s", res.TokensPerSecond, res.FirstTokenSeconds)
		}
		phase(on, done)
	}
	tokens, spt := res.Deltas, 0.0
	if res.Usage != nil && res.Usage.CompletionTokens > 0 {
		tokens = res.Usage.CompletionTokens
	}
	if res.TokensPerSecond > 0 {
		spt = 1 / res.TokensPerSecond
	}
	msg := res.Message
	msg.Stats = clock.stats(tokens, res.FirstTokenSeconds, spt)
	return Reply{Message: msg}, err
}

func (r *remoteChat) Close() {}

// RemoteServers asks servers over HTTP (ui/remote).
type RemoteServers struct{}

// Models lists the models the server at baseURL serves (/v1/models).
func (RemoteServers) Models(ctx context.Context, baseURL, key string) ([]string, error) {
	c, err := remote.New(baseURL, key, "")
	if err != nil {
		return nil, err
	}
	return c.Models(ctx)
}

// ServerBaseURL is addr as the app keeps a server's address
// (http://HOST:PORT/v1), or why it is not one.
func ServerBaseURL(addr string) (string, error) {
	c, err := remote.New(addr, "", "")
	if err != nil {
		return "", err
	}
	return c.BaseURL, nil
}
