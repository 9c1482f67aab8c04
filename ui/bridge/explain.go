package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"

	"k3/engine"
	"k3/storage/config"
	"k3/storage/hub"
	"k3/storage/trunk"
	"k3/ui/remote"
)

// Explain turns an error into plain words: what happened and what to do.
func Explain(err error) string {
	if err == nil {
		return ""
	}
	var pe *engine.PlanError
	var ce *config.Error
	var he *hub.HTTPError
	var ee *engine.ExpertError
	var ne net.Error
	var ue *UnreachableError
	var fe *FolderError
	var se *ServerError
	first := strings.SplitN(err.Error(), "\n", 2)[0]
	switch {
	case errors.As(err, &fe):
		return fe.Msg
	case errors.As(err, &ue):
		return fmt.Sprintf("k3 cannot reach the model hub (%s): %v. Check the network connection; k3 keeps trying.", ue.Host, ue.Err)
	case errors.Is(err, engine.ErrNoVision):
		return "This model cannot look at pictures: its folder has no vision part. Edit the message to send it without the picture, or choose a model that can see pictures."
	case errors.Is(err, context.Canceled):
		return "Stopped. Nothing was lost: start again to continue where it stopped."
	case errors.As(err, &se):
		return se.explain()
	case errors.As(err, &pe):
		return "There is not enough memory for these settings: " + first +
			". Lower the trunk or expert-cache slider, or pick a smaller preset (Setup wizard, step 4 Memory)."
	case errors.As(err, &ce):
		return "The model's config.json does not describe a model k3 can run (" + strings.TrimPrefix(first, "config ") +
			"). Choose the folder of the Kimi K3 release, or download it again (Setup wizard, step 2)."
	case errors.As(err, &ee):
		return fmt.Sprintf("Routed expert %d of layer %d could not be read from %s, so this reply is not valid. "+
			"Verify the checkpoint (Setup wizard, step 2) and download any bad file again.", ee.Expert, ee.Layer, ee.Path)
	case errors.As(err, &he) && (he.Status == 401 || he.Status == 403):
		return fmt.Sprintf("The model hub refused access (HTTP %d). Paste a valid access token in the Token field "+
			"(from your Hugging Face account settings) and press Resume.", he.Status)
	case errors.As(err, &he) && he.Status == 404:
		return "The model hub does not have that repository or revision. Check the Revision field (empty means main) and press Resume."
	case errors.As(err, &he):
		return fmt.Sprintf("The model hub answered with an error (HTTP %d). Wait a little and press Resume: finished files are kept.", he.Status)
	case errors.Is(err, trunk.ErrSourceMismatch):
		return "The trunk folder holds a packed trunk of a different checkpoint. Choose an empty folder, or delete that trunk and pack again."
	case errors.Is(err, trunk.ErrRefused):
		return "The trunk folder holds a trunk that packing would replace (packed the other way, or by another k3 version, or damaged), " +
			"so nothing was changed. Press Pack again here to replace it, or choose another folder."
	case errors.Is(err, syscall.ENOSPC):
		return "The disk is full (" + first + "). Free some space or choose a folder on another disk, then try again: finished parts are kept."
	case errors.Is(err, os.ErrPermission):
		return "k3 is not allowed to use a file or folder (" + first + "). Choose a folder you own, or change its permissions."
	case errors.Is(err, os.ErrNotExist):
		return "A file or folder is missing (" + first + "). Check that the folder is the right one, or download the checkpoint again."
	case errors.As(err, &ne):
		why, _ := netReason(err)
		if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL) {
			return "The server cannot start there: " + why + "."
		}
		return "The network connection failed: " + why + ". Check the connection and try again."
	}
	// an error no case above knows, as it is (G26: no "Something went
	// wrong:" before expected conditions)
	return sentence(err)
}

// ServerError is an error from the server the app chats with (Settings
// backend "server"): Explain words it for a server, not for a download.
type ServerError struct {
	URL string
	Err error
}

func (e *ServerError) Error() string { return e.Err.Error() }
func (e *ServerError) Unwrap() error { return e.Err }

// serverErr wraps err (nil stays nil; a stop stays a stop).
func serverErr(url string, err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var se *ServerError
	if errors.As(err, &se) {
		return err
	}
	return &ServerError{URL: url, Err: err}
}

// ExplainServer is Explain for an error from the server at url.
func ExplainServer(url string, err error) string { return Explain(serverErr(url, err)) }

// ExplainServerHere is ExplainServer for the Model location dialog itself:
// its advice points at the fields above, not at the dialog the user is in
// (N11: "… in k3 → Model location…." shown inside it).
func ExplainServerHere(url string, err error) string {
	var se *ServerError
	if errors.As(serverErr(url, err), &se) {
		return se.explainAt(true)
	}
	return Explain(err)
}

// menuPlace is where the advice sends the user: the menu item (its name
// ends in "…", which ends the sentence: no fourth dot).
const menuPlace = "in k3 → Model location…"

func (e *ServerError) explain() string { return e.explainAt(false) }

func (e *ServerError) explainAt(here bool) string {
	where := func(what string) string {
		if here {
			return what + " above."
		}
		return what + " " + menuPlace
	}
	host := hostOf(e.URL)
	var re *remote.ServerError
	switch {
	case errors.Is(e.Err, remote.ErrClosedEarly), errors.Is(e.Err, remote.ErrStreamBroke):
		return fmt.Sprintf("The server at %s stopped sending before the reply was complete: did it stop or restart? "+
			"What came is kept. Press Retry once the server runs again.", host)
	case errors.As(e.Err, &re):
		return e.explainStatus(host, re, where)
	}
	if why, ok := netReason(e.Err); ok {
		return fmt.Sprintf("Cannot reach the server at %s: %s. %s", host, why, where("Check the address"))
	}
	return fmt.Sprintf("The server at %s answered: %s", host, sentence(e.Err))
}

// explainStatus words an HTTP error status the server answered with (its
// own message, short, where it says more than the status).
func (e *ServerError) explainStatus(host string, re *remote.ServerError, where func(string) string) string {
	switch {
	case re.Status == 401 || re.Status == 403:
		return fmt.Sprintf("The server at %s does not accept this API key (HTTP %d). %s", host, re.Status, where("Enter its key"))
	case re.Status == 429:
		return fmt.Sprintf("The server at %s is busy (HTTP 429). Wait a little, then press Retry.", host)
	case re.Status == 404:
		return fmt.Sprintf("The server at %s does not know this model or address (HTTP 404). %s", host, where("Choose the model again"))
	}
	said := serverSaid(re.Message)
	if said == "" || said == http.StatusText(re.Status) {
		said = ""
	} else {
		said = fmt.Sprintf(": it said %q", said)
	}
	if re.Status >= 500 {
		return fmt.Sprintf("The server at %s failed on this request (HTTP %d)%s. Press Retry; if it fails again, the server's own log says why.",
			host, re.Status, said)
	}
	return fmt.Sprintf("The server at %s refused this request (HTTP %d)%s.", host, re.Status, said)
}
