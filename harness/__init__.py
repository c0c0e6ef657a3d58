"""gather-harness: property-based correctness checks for distributed all_gather."""
