// Package ratelimit counts requests per key in fixed 60-second windows aligned to the minute,
// in process memory (one replica) or in Redis (shared by every replica).
package ratelimit
