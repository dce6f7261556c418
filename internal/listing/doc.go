// Package listing holds the rules of the API's cursor-paged lists (statements, order history):
// their query parameters, their bounds and their opaque cursors. A cursor names the account and
// the list it was issued for, so another account's cursor, or one of another list, is refused
// rather than read as a position in this one.
package listing
