import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A consumer in GROUP reads TOPIC from the group's committed offsets (the beginning without
 * one) to the end offsets it finds once assigned, commits its positions synchronously and
 * leaves. Prints {"partition", "offset", "value"} per record, then {"committed": {partition:
 * offset}} as the broker returns them after the commit.
 *
 * <p>Usage: ConsumeGroup BOOTSTRAP TOPIC GROUP
 */
public final class ConsumeGroup {
    public static void main(String[] args) {
        String topic = args[1];
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            Map<TopicPartition, Long> ends = null;
            while (true) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("not at the end offsets " + ends + " after 60 s");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    Out.line("partition", r.partition(), "offset", r.offset(),
                            "value", new String(r.value(), StandardCharsets.UTF_8));
                }
                Set<TopicPartition> assigned = consumer.assignment();
                if (assigned.isEmpty()) {
                    continue;
                }
                if (ends == null) {
                    ends = consumer.endOffsets(assigned, Duration.ofSeconds(30));
                }
                boolean done = true;
                for (TopicPartition tp : assigned) {
                    done &= consumer.position(tp) >= ends.get(tp);
                }
                if (done) {
                    break;
                }
            }
            consumer.commitSync();
            Map<Integer, Long> committed = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e
                    : consumer.committed(new HashSet<>(consumer.assignment())).entrySet()) {
                committed.put(e.getKey().partition(), e.getValue() == null ? null : e.getValue().offset());
            }
            Out.line("committed", committed);
        }
    }
}
