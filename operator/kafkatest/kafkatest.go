// Package kafkatest holds what the tests that need a real Kafka broker share
// (files *_kafka_test.go in operator and cmd/dpstream): finding the broker,
// and skipping with a message saying how to start it when it is not there.
// deploy/test.sh (and so CI) starts the project's broker and sets
// DPSTREAM_TEST_BROKERS.
package kafkatest

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// EnvBrokers is the environment variable naming the test brokers,
// comma-separated.
const EnvBrokers = "DPSTREAM_TEST_BROKERS"

// dialTimeout bounds the reachability check of the first broker: a local
// broker answers in milliseconds; 3 s tolerates a loaded CI machine.
const dialTimeout = 3 * time.Second

// Brokers returns the brokers of DPSTREAM_TEST_BROKERS, or skips the test
// when the variable is unset or the first broker does not accept
// connections.
func Brokers(t testing.TB) []string {
	t.Helper()
	env := os.Getenv(EnvBrokers)
	if env == "" {
		t.Skip(EnvBrokers + " is not set: run deploy/kafka/kafka.sh start and export " + EnvBrokers + " as the address it prints (127.0.0.1:9092, or the port of DPSTREAM_KAFKA_PORT); deploy/test.sh does both")
	}
	brokers := strings.Split(env, ",")
	conn, err := net.DialTimeout("tcp", brokers[0], dialTimeout)
	if err != nil {
		t.Skipf("%s=%s does not accept connections (%v): start it with deploy/kafka/kafka.sh start", EnvBrokers, env, err)
	}
	conn.Close()
	return brokers
}
