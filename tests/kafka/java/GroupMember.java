import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One member of a consumer group (Kafka's classic protocol, the consumer's default): it
 * subscribes to TOPIC, polls, commits synchronously after every poll that returned records, and
 * prints JSON lines: {"assigned": [partitions]} and {"revoked": [partitions]} as the group
 * rebalances, {"partition", "offset", "value"} per record (value as text), {"committed": n}
 * after each commit. A line "leave" on stdin (or its end) makes it close, which leaves the group
 * at once (LeaveGroup); it then prints {"closed": true}.
 *
 * <p>Usage: GroupMember BOOTSTRAP TOPIC GROUP
 */
public final class GroupMember {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        AtomicBoolean leave = new AtomicBoolean();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            Thread stdin = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(
                        new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = in.readLine()) != null && !line.trim().equals("leave")) {
                        // only "leave" means anything
                    }
                } catch (Exception ignored) {
                    // the end of stdin is a "leave" too
                }
                leave.set(true);
                consumer.wakeup();
            });
            stdin.setDaemon(true);
            stdin.start();
            consumer.subscribe(List.of(args[1]), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    Out.line("revoked", sorted(partitions));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    Out.line("assigned", sorted(partitions));
                }
            });
            while (!leave.get()) {
                try {
                    var records = consumer.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        Out.line("partition", r.partition(), "offset", r.offset(),
                                "value", new String(r.value(), StandardCharsets.UTF_8));
                    }
                    if (!records.isEmpty()) {
                        consumer.commitSync();
                        Out.line("committed", records.count());
                    }
                } catch (org.apache.kafka.common.errors.WakeupException e) {
                    break;
                }
            }
        }
        Out.line("closed", true);
    }

    private static List<Integer> sorted(Collection<TopicPartition> partitions) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            out.add(tp.partition());
        }
        Collections.sort(out);
        return out;
    }
}
