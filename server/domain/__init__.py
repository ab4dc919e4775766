"""The rules, no Flask: statuses, visibility, exposure, partitions, provenance, publication,
audit, people and teams, facts, gold versions, releases. Nothing here commits: the action that
calls it owns the transaction."""
