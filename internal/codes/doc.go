// Package codes protects redemption codes: AES-256-GCM encryption at rest, keyed digests that
// detect duplicates without revealing codes, the database's record of the key they are sealed
// under, and the import of production stock.
package codes
