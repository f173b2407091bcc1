"""The broker core: addresses, queues, post office (routing), consumers, filters."""
