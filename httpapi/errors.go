package httpapi

import "errors"

// ErrGracePeriodTooShort is wrapped by CheckGracePeriod's error when a
// graceful stop may outlast the grace period.
var ErrGracePeriodTooShort = errors.New("httpapi: grace period too short")

// errAdminDisabled is the body of a 403 from an admin endpoint of a node
// started without a token.
var errAdminDisabled = errors.New("admin endpoints are disabled: start the node with --admin-token-file FILE " +
	"(or " + AdminTokenEnv + " in its environment) holding a secret token, then send \"Authorization: Bearer <token>\"")
