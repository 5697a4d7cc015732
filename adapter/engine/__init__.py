"""What SGLang and the router in front of it accept, as both sides need to know it (the
transport that sends the episodes' requests is the episode side's)."""
