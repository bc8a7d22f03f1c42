// Package windows aggregates events into event-time tumbling windows with
// per-unit contribution bounds. It is pure and clock-free: time comes in as
// arguments.
package windows
