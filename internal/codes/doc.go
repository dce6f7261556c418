// Package codes protects redemption codes: AES-256-GCM encryption at rest, keyed digests that
// detect duplicates without revealing codes, the database's record of the key they are sealed
// under, the import of production stock, and the rule of when a product's stock is low.
package codes
