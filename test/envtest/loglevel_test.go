package envtest_test

import (
	"os"

	"go.uber.org/zap/zapcore"
)

// zapLevel is info with VIRTSTATION_TEST_VERBOSE set, errors only otherwise.
func zapLevel() zapcore.Level {
	if os.Getenv("VIRTSTATION_TEST_VERBOSE") != "" {
		return zapcore.InfoLevel
	}
	return zapcore.ErrorLevel
}
