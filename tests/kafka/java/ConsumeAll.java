import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads every record of a topic with Kafka's own consumer and prints one JSON object per record:
 * {"partition", "offset", "timestamp", "timestampType", "key", "value", "headers"}, keys, values
 * and header values in base64 (null stays null), partitions in order.
 *
 * <p>Usage: ConsumeAll BOOTSTRAP TOPIC [isolation.level]. No group: the partitions are assigned
 * and read from the log start offset to the end offset that the broker reports at the start.
 */
public final class ConsumeAll {
    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (args.length > 2) {
            props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, args[2]);
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            partitions.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions, Duration.ofSeconds(30));
            List<List<String>> lines = new ArrayList<>();
            for (int i = 0; i < partitions.size(); i++) {
                lines.add(new ArrayList<>());
            }
            long deadline = System.currentTimeMillis() + 60_000;
            while (!done(consumer, partitions, ends)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("not at the end offsets " + ends + " after 60 s");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    lines.get(partitions.indexOf(new TopicPartition(topic, r.partition()))).add(json(r));
                }
            }
            for (List<String> partition : lines) {
                for (String line : partition) {
                    System.out.println(line);
                }
            }
        }
    }

    private static boolean done(
            KafkaConsumer<byte[], byte[]> consumer,
            List<TopicPartition> partitions,
            Map<TopicPartition, Long> ends) {
        for (TopicPartition tp : partitions) {
            if (consumer.position(tp) < ends.get(tp)) {
                return false;
            }
        }
        return true;
    }

    private static String b64(byte[] bytes) {
        return bytes == null ? "null" : "\"" + Base64.getEncoder().encodeToString(bytes) + "\"";
    }

    private static String json(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder headers = new StringBuilder("[");
        for (Header h : r.headers()) {
            if (headers.length() > 1) {
                headers.append(',');
            }
            headers.append("[\"")
                    .append(Base64.getEncoder().encodeToString(h.key().getBytes(java.nio.charset.StandardCharsets.UTF_8)))
                    .append("\",")
                    .append(b64(h.value()))
                    .append(']');
        }
        headers.append(']');
        return "{\"partition\":" + r.partition()
                + ",\"offset\":" + r.offset()
                + ",\"timestamp\":" + r.timestamp()
                + ",\"timestampType\":\"" + r.timestampType().name + "\""
                + ",\"key\":" + b64(r.key())
                + ",\"value\":" + b64(r.value())
                + ",\"headers\":" + headers + "}";
    }
}
