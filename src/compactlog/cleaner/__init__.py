"""The log cleaner: offset map, selection of the filthiest log, the cleaning algorithm, stats."""
