import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.Base64;

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.Readable;

/**
 * Reads one value of a {@code __consumer_offsets} record with Kafka's own generated class:
 * {@code GroupRecordValue <ClassName> <base64 of the version-prefixed value>}, where the class is
 * one of {@code org.apache.kafka.coordinator.group.generated}. Prints one line: the value as
 * Kafka's JSON converter renders it, and the bytes Kafka writes for it again (version-prefixed).
 */
public final class GroupRecordValue {
    public static void main(String[] args) throws Exception {
        String pkg = "org.apache.kafka.coordinator.group.generated.";
        Class<?> type = Class.forName(pkg + args[0]);
        ByteBuffer buffer = ByteBuffer.wrap(Base64.getDecoder().decode(args[1]));
        short version = buffer.getShort();
        Message value = (Message) type.getConstructor(Readable.class, short.class)
            .newInstance(new ByteBufferAccessor(buffer), version);
        Class<?> converter = Class.forName(pkg + args[0] + "JsonConverter");
        Method write = converter.getMethod("write", type, short.class);
        Object json = write.invoke(null, value, version);
        byte[] again = MessageUtil.toVersionPrefixedBytes(version, value);
        Out.line("json", json.toString(), "bytes", Out.b64(again), "left", buffer.remaining());
    }
}
