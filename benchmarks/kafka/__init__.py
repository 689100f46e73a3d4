"""Apache Kafka 4.4 beside groupcoord: its jars from Maven Central, fetched once into a cache."""
