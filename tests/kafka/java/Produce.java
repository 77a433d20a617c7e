import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's own producer (idempotent, acks=all: its defaults) sends COUNT records to TOPIC in one
 * batch per partition (they are all sent, then flushed) and prints one line per record, in send
 * order: {"partition", "offset", "timestamp"} when acknowledged, {"error", "message"} when not.
 *
 * <p>Usage: Produce BOOTSTRAP TOPIC CODEC COUNT KEYS TAG BASE_TIMESTAMP [PARTITION|-1] [keyless]
 *
 * <p>Record i: key "k{i % KEYS}" (none with "keyless"), value "{TAG}-{i}", timestamp
 * BASE_TIMESTAMP + i * 1000, headers ("i", "{i}") and, for every third record, ("none", null).
 */
public final class Produce {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String codec = args[2];
        int count = Integer.parseInt(args[3]);
        int keys = Integer.parseInt(args[4]);
        String tag = args[5];
        long base = Long.parseLong(args[6]);
        Integer partition = args.length > 7 && !args[7].equals("-1") ? Integer.valueOf(args[7]) : null;
        boolean keyless = args.length > 8 && args[8].equals("keyless");

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "60000"); // one batch: flush() sends it
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                RecordHeaders headers = new RecordHeaders();
                headers.add("i", Out.utf8(Integer.toString(i)));
                if (i % 3 == 0) {
                    headers.add("none", null);
                }
                byte[] key = keyless ? null : Out.utf8("k" + (i % keys));
                sent.add(producer.send(new ProducerRecord<>(
                        topic, partition, base + i * 1000L, key, Out.utf8(tag + "-" + i), headers)));
            }
            producer.flush();
            for (Future<RecordMetadata> future : sent) {
                try {
                    RecordMetadata m = future.get();
                    Out.line("partition", m.partition(), "offset", m.offset(), "timestamp", m.timestamp());
                } catch (Exception e) {
                    Out.line("error", Out.error(e).get("error"), "message", Out.error(e).get("message"));
                }
            }
        }
    }
}
