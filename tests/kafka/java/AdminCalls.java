import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DeleteTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's Admin client through the calls the Python clients' admin tests make, printing one
 * JSON line per call: {"op": name, ...its outcome} or {"op": name, "error", "message"}. Topic
 * and cluster ids are random, so they are printed as what can be compared: whether they are
 * set and whether two calls agree.
 *
 * <p>Usage: AdminCalls BOOTSTRAP BASE_TIMESTAMP
 */
public final class AdminCalls {
    private static Admin admin;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        long base = Long.parseLong(args[1]);
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        try (Admin a = Admin.create(props)) {
            admin = a;
            topics();
            configs();
            offsetsAndRecords(bootstrap, base);
            groups(bootstrap);
            cluster();
            deletions();
        }
    }

    // --- topics ---------------------------------------------------------------------------------
    private static final Map<String, Uuid> CREATED = new TreeMap<>();

    private static void topics() throws Exception {
        List<NewTopic> topics = List.of(
                new NewTopic("a", 3, (short) 1).configs(Map.of(
                        "cleanup.policy", "compact", "segment.bytes", "1048576")),
                new NewTopic("b", Optional.empty(), Optional.empty()),
                new NewTopic("times", 1, (short) 1));
        CreateTopicsResult created = admin.createTopics(topics);
        for (NewTopic topic : topics) {
            String name = topic.name();
            call("createTopics", () -> {
                created.values().get(name).get(30, TimeUnit.SECONDS);
                Uuid id = created.topicId(name).get();
                CREATED.put(name, id);
                Config config = created.config(name).get();
                return map("topic", name, "partitions", created.numPartitions(name).get(),
                        "replicationFactor", created.replicationFactor(name).get(),
                        "hasTopicId", !id.equals(Uuid.ZERO_UUID),
                        "cleanup.policy", config.get("cleanup.policy").value(),
                        "cleanup.policy.source", config.get("cleanup.policy").source().name(),
                        "min.insync.replicas.source", config.get("min.insync.replicas").source().name());
            });
        }
        for (NewTopic refused : List.of(
                new NewTopic("a", 1, (short) 1),
                new NewTopic("bad name", 1, (short) 1),
                new NewTopic("r", 1, (short) 3),
                new NewTopic("z", 0, (short) 1),
                new NewTopic("c", 1, (short) 1).configs(Map.of("retention.ms", "abc")),
                new NewTopic("c", 1, (short) 1).configs(Map.of("no.such.config", "1")))) {
            call("createTopics", () -> {
                admin.createTopics(List.of(refused)).all().get(30, TimeUnit.SECONDS);
                return map("topic", refused.name());
            });
        }
        call("listTopics", () -> map("names", new TreeMap<>(
                admin.listTopics().namesToListings().get()).keySet()));
        for (String name : List.of("a", "b", "nosuch")) {
            call("describeTopics", () -> {
                TopicDescription d = admin.describeTopics(List.of(name)).allTopicNames().get().get(name);
                List<Object> partitions = new ArrayList<>();
                for (TopicPartitionInfo p : d.partitions()) {
                    partitions.add(map("partition", p.partition(), "leader", p.leader().id(),
                            "replicas", ids(p.replicas()), "isr", ids(p.isr()),
                            "elr", ids(p.elr()), "lastKnownElr", ids(p.lastKnownElr())));
                }
                return map("topic", d.name(), "internal", d.isInternal(),
                        "sameTopicId", d.topicId().equals(CREATED.get(name)), "partitions", partitions);
            });
        }
        call("describeTopicsById", () -> {
            Uuid id = CREATED.get("a");
            TopicDescription d = admin.describeTopics(TopicCollection.ofTopicIds(List.of(id)))
                    .allTopicIds().get().get(id);
            return map("topic", d.name(), "partitions", d.partitions().size());
        });
    }

    // --- configs --------------------------------------------------------------------------------
    private static void configs() throws Exception {
        ConfigResource a = new ConfigResource(ConfigResource.Type.TOPIC, "a");
        describeTopicConfigs("a", "cleanup.policy", "segment.bytes", "retention.ms", "min.insync.replicas");
        call("incrementalAlterConfigs", () -> {
            admin.incrementalAlterConfigs(Map.of(a, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "60000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("segment.bytes", null), AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.APPEND))))
                    .all().get();
            return map("topic", "a");
        });
        describeTopicConfigs("a", "cleanup.policy", "segment.bytes", "retention.ms");
        for (AlterConfigOp refused : List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "abc"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("no.such", "1"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("retention.ms", "1"), AlterConfigOp.OpType.APPEND))) {
            call("incrementalAlterConfigs", () -> {
                admin.incrementalAlterConfigs(Map.of(a, List.of(refused))).all().get();
                return map("config", refused.configEntry().name());
            });
        }
        call("incrementalAlterConfigs", () -> {
            ConfigResource missing = new ConfigResource(ConfigResource.Type.TOPIC, "nosuch");
            admin.incrementalAlterConfigs(Map.of(missing, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", "1"), AlterConfigOp.OpType.SET)))).all().get();
            return map("topic", "nosuch");
        });
        describeTopicConfigs("nosuch", "retention.ms");
        call("describeConfigs", () -> {
            ConfigResource cluster = new ConfigResource(ConfigResource.Type.BROKER, "");
            Config config = admin.describeConfigs(List.of(cluster)).all().get().get(cluster);
            List<Object> entries = new ArrayList<>();
            for (ConfigEntry e : config.entries()) {
                entries.add(entry(e));
            }
            return map("resource", "cluster defaults", "entries", entries);
        });
    }

    private static void describeTopicConfigs(String topic, String... names) {
        call("describeConfigs", () -> {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            List<Object> entries = new ArrayList<>();
            for (String name : names) {
                entries.add(entry(config.get(name)));
            }
            int overrides = 0;
            for (ConfigEntry e : config.entries()) {
                if (e.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG) {
                    overrides++;
                }
            }
            return map("topic", topic, "entries", entries, "overrides", overrides);
        });
    }

    private static Map<String, Object> entry(ConfigEntry e) {
        List<Object> synonyms = new ArrayList<>();
        for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
            synonyms.add(s.source().name() + ":" + s.name() + "=" + s.value());
        }
        return map("name", e.name(), "value", e.value(), "source", e.source().name(),
                "readOnly", e.isReadOnly(), "sensitive", e.isSensitive(), "synonyms", synonyms);
    }

    // --- offsets and records --------------------------------------------------------------------
    private static void offsetsAndRecords(String bootstrap, long base) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < 10; i++) {
                // a record with the largest timestamp in the middle, for MAX_TIMESTAMP
                long ts = base + (i == 6 ? 20_000 : i * 1000L);
                producer.send(new ProducerRecord<>("times", 0, ts, Out.utf8("k" + i), Out.utf8("v" + i))).get();
            }
        }
        TopicPartition tp = new TopicPartition("times", 0);
        Map<String, OffsetSpec> specs = new LinkedHashMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("maxTimestamp", OffsetSpec.maxTimestamp());
        specs.put("earliestLocal", OffsetSpec.earliestLocal());
        specs.put("latestTiered", OffsetSpec.latestTiered());
        specs.put("forTimestamp(base+5500)", OffsetSpec.forTimestamp(base + 5500));
        specs.put("forTimestamp(base+60000)", OffsetSpec.forTimestamp(base + 60_000));
        for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
            listOffsets(tp, spec.getKey(), spec.getValue(), base);
        }
        listOffsets(new TopicPartition("nosuch", 0), "latest", OffsetSpec.latest(), base);
        deleteRecords(tp, 4);
        deleteRecords(tp, 1000);
        deleteRecords(new TopicPartition("a", 0), 0);
        listOffsets(tp, "earliest", OffsetSpec.earliest(), base);
    }

    private static void listOffsets(TopicPartition tp, String spec, OffsetSpec offsetSpec, long base) {
        call("listOffsets", () -> {
            ListOffsetsResult.ListOffsetsResultInfo info =
                    admin.listOffsets(Map.of(tp, offsetSpec)).partitionResult(tp).get();
            long ts = info.timestamp();
            return map("partition", tp.toString(), "spec", spec, "offset", info.offset(),
                    "timestamp", ts < 0 ? ts : ts - base,
                    "leaderEpoch", info.leaderEpoch().orElse(-1));
        });
    }

    private static void deleteRecords(TopicPartition tp, long before) {
        call("deleteRecords", () -> {
            long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(before)))
                    .lowWatermarks().get(tp).get().lowWatermark();
            return map("partition", tp.toString(), "before", before, "lowWatermark", low);
        });
    }

    // --- groups ---------------------------------------------------------------------------------
    private static void groups(String bootstrap) throws Exception {
        TopicPartition tp = new TopicPartition("times", 0);
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, "admin-g");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(tp));
            consumer.commitSync(Map.of(tp, new OffsetAndMetadata(7, "checkpoint 7")));
            call("committed", () -> {
                OffsetAndMetadata om = consumer.committed(java.util.Set.of(tp)).get(tp);
                return map("offset", om.offset(), "metadata", om.metadata(),
                        "leaderEpoch", om.leaderEpoch().orElse(-1));
            });
        }
        call("listGroups", () -> {
            List<Object> groups = new ArrayList<>();
            for (GroupListing g : sortedGroups(admin.listGroups().all().get())) {
                groups.add(map("group", g.groupId(), "type", g.type().map(Object::toString).orElse(null),
                        "protocol", g.protocol(), "state", g.groupState().map(Object::toString).orElse(null)));
            }
            return map("groups", groups);
        });
        call("listConsumerGroups", () -> {
            List<Object> groups = new ArrayList<>();
            for (GroupListing g : sortedGroups(admin.listGroups(
                    org.apache.kafka.clients.admin.ListGroupsOptions.forConsumerGroups()).all().get())) {
                groups.add(g.groupId());
            }
            return map("groups", groups);
        });
        for (String group : List.of("admin-g", "nosuch")) {
            call("describeConsumerGroups", () -> {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                        .describedGroups().get(group).get();
                List<Object> members = new ArrayList<>();
                for (MemberDescription m : d.members()) {
                    members.add(map("clientId", m.clientId(), "host", m.host()));
                }
                return map("group", d.groupId(), "simple", d.isSimpleConsumerGroup(),
                        "state", d.groupState().toString(), "type", d.type().toString(),
                        "assignor", d.partitionAssignor(), "coordinator", d.coordinator().id(),
                        "members", members);
            });
        }
        listGroupOffsets("admin-g");
        call("alterConsumerGroupOffsets", () -> {
            admin.alterConsumerGroupOffsets("admin-g", Map.of(tp, new OffsetAndMetadata(2, "reset")))
                    .all().get();
            return map("group", "admin-g");
        });
        listGroupOffsets("admin-g");
        listGroupOffsets("nosuch");
    }

    private static List<GroupListing> sortedGroups(Collection<GroupListing> groups) {
        List<GroupListing> out = new ArrayList<>(groups);
        out.sort((x, y) -> x.groupId().compareTo(y.groupId()));
        return out;
    }

    private static void listGroupOffsets(String group) {
        call("listConsumerGroupOffsets", () -> {
            Map<String, Object> offsets = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e
                    : admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().entrySet()) {
                OffsetAndMetadata om = e.getValue();
                offsets.put(e.getKey().toString(), om == null ? null : map(
                        "offset", om.offset(), "metadata", om.metadata(),
                        "leaderEpoch", om.leaderEpoch().orElse(-1)));
            }
            return map("group", group, "offsets", offsets);
        });
    }

    // --- the cluster and deletions --------------------------------------------------------------
    private static void cluster() {
        call("describeCluster", () -> {
            DescribeClusterResult cluster = admin.describeCluster();
            List<Object> nodes = new ArrayList<>();
            for (Node n : cluster.nodes().get()) {
                nodes.add(map("id", n.id(), "host", n.host(), "rack", n.rack()));
            }
            return map("clusterIdLength", cluster.clusterId().get().length(),
                    "controller", cluster.controller().get().id(), "nodes", nodes);
        });
    }

    private static void deletions() {
        call("deleteTopics", () -> {
            admin.deleteTopics(List.of("b")).all().get();
            return map("topics", List.of("b"));
        });
        call("deleteTopics", () -> {
            admin.deleteTopics(List.of("nosuch")).all().get();
            return map("topics", List.of("nosuch"));
        });
        call("deleteTopicsById", () -> {
            DeleteTopicsResult done = admin.deleteTopics(TopicCollection.ofTopicIds(List.of(CREATED.get("a"))));
            done.all().get();
            return map("deleted", "a");
        });
        call("deleteTopicsById", () -> {
            admin.deleteTopics(TopicCollection.ofTopicIds(List.of(Uuid.randomUuid()))).all().get();
            return map("deleted", "random id");
        });
        // Kafka's brokers learn of a deletion from the controller a moment after it returns:
        // the listing is taken once neither deleted topic is in it (at most 10 s).
        call("listTopics", () -> {
            long deadline = System.currentTimeMillis() + 10_000;
            java.util.Set<String> names;
            do {
                names = new java.util.TreeSet<>(admin.listTopics().names().get());
            } while ((names.contains("a") || names.contains("b")) && System.currentTimeMillis() < deadline);
            return map("names", names);
        });
    }

    // --- helpers --------------------------------------------------------------------------------
    private static void call(String op, Callable<Map<String, Object>> body) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("op", op);
        try {
            out.putAll(body.call());
        } catch (Exception e) {
            out.putAll(Out.error(e));
        }
        List<Object> flat = new ArrayList<>();
        for (Map.Entry<String, Object> e : out.entrySet()) {
            flat.add(e.getKey());
            flat.add(e.getValue());
        }
        Out.line(flat.toArray());
    }

    private static Map<String, Object> map(Object... keysAndValues) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            out.put(String.valueOf(keysAndValues[i]), keysAndValues[i + 1]);
        }
        return out;
    }

    private static List<Integer> ids(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node n : nodes) {
            out.add(n.id());
        }
        return out;
    }
}
