"""The consumer: fetcher, record decoding, the group coordinator client and assignors."""
