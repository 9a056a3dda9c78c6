package cli

import (
	"context"
	"fmt"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"
)

// redisLogger takes go-redis's own lines (a pool's failed dials, ...) to
// the node's log at debug level: baton reports what they describe in its
// own errors, and they would otherwise go to stderr first, raw.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.Log(ctx, slog.LevelDebug, "redis client", "detail", fmt.Sprintf(format, v...))
}

// quietRedisClient routes go-redis's process-wide logger to log.
func quietRedisClient(log *slog.Logger) { goredis.SetLogger(redisLogger{log}) }
