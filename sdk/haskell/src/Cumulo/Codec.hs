{-# LANGUAGE OverloadedStrings #-}
-- | The frames of protocol v1 (PROTOCOL.md section 4): their types, and
-- encoding and decoding in both directions (the core's side is what the
-- tests' fake core speaks).
module Cumulo.Codec
  ( TransId (..)
  , Hello (..), Control (..), Send (..), Answer (..), Welcome (..), Request (..)
  , Reply (..), McastSent (..)
  , Message (..)
  , encode
  , decodeFrame
  , decodeMessage
  , decodeBody
  , defaultMaxFrame
  , requestOverhead
  ) where

import Control.Monad (replicateM, unless)
import Data.Binary.Get
import Data.Bits (shiftL, (.|.))
import qualified Data.ByteString as B
import qualified Data.ByteString.Builder as BB
import qualified Data.ByteString.Lazy as BL
import qualified Data.ByteString.Unsafe as BU
import Data.Int (Int8)
import Data.Text (Text)
import qualified Data.Text as T
import qualified Data.Text.Encoding as TE
import Data.Word (Word16, Word32, Word64, Word8)

import Cumulo.Status

-- | A trans_id: 16 bytes, time-ordered when compared as bytes (PROTOCOL.md 2.2).
newtype TransId = TransId {transIdBytes :: B.ByteString} deriving (Eq, Ord)

instance Show TransId where
  show (TransId b) = concatMap hex (B.unpack b)
    where hex w = [digits !! fromIntegral (w `div` 16), digits !! fromIntegral (w `mod` 16)]
          digits = "0123456789abcdef"

data Hello = Hello
  { helloVersion :: !Word16, helloWindow :: !Word32, helloThreadIndex :: !Word32
  , helloToken :: !Text, helloPrefix :: !Text } deriving (Eq, Show)

-- | @SUBSCRIBE@, @UNSUBSCRIBE@ and @SUBSCRIBE_COUNT@.
data Control = Control {controlReqId :: !Word32, controlPattern :: !Text} deriving (Eq, Show)

-- | @SEND_ASYNC@, @SEND_SYNC@, @MCAST_ASYNC@ and @FORWARD@.
data Send = Send
  { sendTransId :: !TransId, sendTimeout :: !Word32, sendPriority :: !Int8, sendFlags :: !Word8
  , sendName :: !Text, sendInfo :: !B.ByteString, sendRequest :: !B.ByteString } deriving (Eq, Show)

-- | @RETURN@ and @RESPONSE@ (one layout).
data Answer = Answer
  { answerTransId :: !TransId, answerStatus :: !Status
  , answerInfo :: !B.ByteString, answerBody :: !B.ByteString } deriving (Eq, Show)

data Welcome = Welcome
  { welcomeVersion :: !Word16, welcomeNodeId :: !Word32, welcomeInstanceId :: !Word32
  , welcomeProcessIndex :: !Word32, welcomeProcessCount :: !Word32, welcomeThreadCount :: !Word32
  , welcomeWindow :: !Word32, welcomeMaxFrame :: !Word32, welcomeTimeoutAsync :: !Word32
  , welcomeTimeoutSync :: !Word32, welcomeTimeoutTerminate :: !Word32
  , welcomePriorityDefault :: !Int8, welcomeKeepalive :: !Word32, welcomePrefix :: !Text }
  deriving (Eq, Show)

-- | A request delivered to this instance (what a handler receives).
data Request = Request
  { requestTransId :: !TransId, requestTimeout :: !Word32, requestPriority :: !Int8
  , requestFlags :: !Word8, requestSource :: !Word64, requestName :: !Text
  , requestPattern :: !Text, requestInfo :: !B.ByteString, requestBody :: !B.ByteString }
  deriving (Eq, Show)

data Reply = Reply
  { replyReqId :: !Word32, replyStatus :: !Status, replyValue :: !Word32, replyMessage :: !Text }
  deriving (Eq, Show)

data McastSent = McastSent {mcastTransId :: !TransId, mcastTransIds :: ![TransId]}
  deriving (Eq, Show)

-- | Every frame of the protocol, by its type.
data Message
  = MHello !Hello
  | MSubscribe !Control
  | MUnsubscribe !Control
  | MSubscribeCount !Control
  | MSendAsync !Send
  | MSendSync !Send
  | MMcastAsync !Send
  | MForward !Send
  | MReturn !Answer
  | MPing !Word64
  | MPong !Word64
  | MGoodbye
  | MWelcome !Welcome
  | MRequest !Request
  | MResponse !Answer
  | MReply !Reply
  | MMcastSent !McastSent
  | MTerminate !Word32
  | MError !Status !Text
  deriving (Eq, Show)

-- | The core's default frame limit, until WELCOME tells the real one.
defaultMaxFrame :: Word32
defaultMaxFrame = 8 * 1024 * 1024

-- | What a REQUEST adds to the SEND it comes from (source, pattern): an
-- instance accepts frames up to @max_frame + requestOverhead@.
requestOverhead :: Word32
requestOverhead = 8 + 2 + 65535

-- ---------------------------------------------------------------- encoding

-- | The whole frame, length prefix included.
encode :: Message -> B.ByteString
encode msg = BL.toStrict (BB.toLazyByteString (BB.word32LE (fromIntegral (BL.length body) + 1) <> BB.word8 typ <> BB.lazyByteString body))
  where
    (typ, b) = build msg
    body = BB.toLazyByteString b

build :: Message -> (Word8, BB.Builder)
build m = case m of
  MHello h -> (0x01, BB.word16LE (helloVersion h) <> BB.word32LE (helloWindow h)
                 <> BB.word32LE (helloThreadIndex h) <> str (helloToken h) <> str (helloPrefix h))
  MSubscribe c -> (0x02, control c)
  MUnsubscribe c -> (0x03, control c)
  MSubscribeCount c -> (0x04, control c)
  MSendAsync s -> (0x10, send s)
  MSendSync s -> (0x11, send s)
  MMcastAsync s -> (0x12, send s)
  MReturn a -> (0x20, answer a)
  MForward s -> (0x21, send s)
  MPing n -> (0x30, BB.word64LE n)
  MPong n -> (0x31, BB.word64LE n)
  MGoodbye -> (0x32, mempty)
  MWelcome w -> (0x81, mconcat
    [ BB.word16LE (welcomeVersion w), BB.word32LE (welcomeNodeId w), BB.word32LE (welcomeInstanceId w)
    , BB.word32LE (welcomeProcessIndex w), BB.word32LE (welcomeProcessCount w)
    , BB.word32LE (welcomeThreadCount w), BB.word32LE (welcomeWindow w), BB.word32LE (welcomeMaxFrame w)
    , BB.word32LE (welcomeTimeoutAsync w), BB.word32LE (welcomeTimeoutSync w)
    , BB.word32LE (welcomeTimeoutTerminate w), BB.int8 (welcomePriorityDefault w)
    , BB.word32LE (welcomeKeepalive w), str (welcomePrefix w) ])
  MRequest r -> (0x82, mconcat
    [ tid (requestTransId r), BB.word32LE (requestTimeout r), BB.int8 (requestPriority r)
    , BB.word8 (requestFlags r), BB.word64LE (requestSource r), str (requestName r)
    , str (requestPattern r), bytes (requestInfo r), bytes (requestBody r) ])
  MResponse a -> (0x83, answer a)
  MReply r -> (0x84, BB.word32LE (replyReqId r) <> BB.word16LE (replyStatus r)
                 <> BB.word32LE (replyValue r) <> str (replyMessage r))
  MMcastSent s -> (0x85, tid (mcastTransId s) <> BB.word32LE (fromIntegral (length (mcastTransIds s)))
                     <> foldMap tid (mcastTransIds s))
  MTerminate t -> (0x86, BB.word32LE t)
  MError s t -> (0x87, BB.word16LE s <> str t)
  where
    control c = BB.word32LE (controlReqId c) <> str (controlPattern c)
    send s = tid (sendTransId s) <> BB.word32LE (sendTimeout s) <> BB.int8 (sendPriority s)
      <> BB.word8 (sendFlags s) <> str (sendName s) <> bytes (sendInfo s) <> bytes (sendRequest s)
    answer a = tid (answerTransId a) <> BB.word16LE (answerStatus a) <> bytes (answerInfo a)
      <> bytes (answerBody a)
    tid (TransId t) = BB.byteString t
    str t = let u = TE.encodeUtf8 t in BB.word16LE (fromIntegral (B.length u)) <> BB.byteString u
    bytes b = BB.word32LE (fromIntegral (B.length b)) <> BB.byteString b

-- ---------------------------------------------------------------- decoding

-- | The first frame of a buffer: @Right Nothing@ while it is incomplete,
-- else the message and the bytes after it. A length over @limit@ is
-- @TOO_LARGE@ as soon as the length field is there (the body is not awaited);
-- anything undecodable is @MALFORMED@.
decodeFrame :: Word32 -> B.ByteString -> Either CumuloError (Maybe (Message, B.ByteString))
decodeFrame limit buf
  | B.length buf < 4 = Right Nothing
  | len == 0 = Left (CumuloError statusMalformed "frame length 0 (a frame holds at least its type)")
  | len > limit = Left (CumuloError statusTooLarge
      (T.pack ("frame of " ++ show len ++ " bytes is over the limit of " ++ show limit)))
  | B.length buf - 4 < fromIntegral len = Right Nothing
  | otherwise = do
      let (frame, rest) = B.splitAt (4 + fromIntegral len) buf
      msg <- decodeBody (BU.unsafeIndex frame 4) (B.drop 5 frame)
      Right (Just (msg, rest))
  where
    len = le32 buf

-- | Exactly one whole frame: a truncated frame or bytes after it are @MALFORMED@.
decodeMessage :: Word32 -> B.ByteString -> Either CumuloError Message
decodeMessage limit buf = decodeFrame limit buf >>= \r -> case r of
  Just (msg, rest) | B.null rest -> Right msg
                   | otherwise -> Left (CumuloError statusMalformed "bytes after the frame")
  Nothing -> Left (CumuloError statusMalformed "the frame is truncated")

le32 :: B.ByteString -> Word32
le32 b = foldr (\i acc -> (acc `shiftL` 8) .|. fromIntegral (BU.unsafeIndex b i)) 0 [0 .. 3]

-- | A frame's body, given its type byte; the body must be consumed exactly.
decodeBody :: Word8 -> B.ByteString -> Either CumuloError Message
decodeBody typ body = case runGetOrFail (getMessage typ <* end) (BL.fromStrict body) of
  Right (_, _, msg) -> Right msg
  Left (_, _, why) -> Left (CumuloError statusMalformed (T.pack why))
  where
    end = do
      done <- isEmpty
      unless done (fail "trailing bytes after the frame's fields")

getMessage :: Word8 -> Get Message
getMessage typ = case typ of
  0x01 -> MHello <$> (Hello <$> getWord16le <*> getWord32le <*> getWord32le <*> getStr <*> getStr)
  0x02 -> MSubscribe <$> control
  0x03 -> MUnsubscribe <$> control
  0x04 -> MSubscribeCount <$> control
  0x10 -> MSendAsync <$> send
  0x11 -> MSendSync <$> send
  0x12 -> MMcastAsync <$> send
  0x20 -> MReturn <$> answer
  0x21 -> MForward <$> send
  0x30 -> MPing <$> getWord64le
  0x31 -> MPong <$> getWord64le
  0x32 -> pure MGoodbye
  0x81 -> MWelcome <$> (Welcome <$> getWord16le <*> getWord32le <*> getWord32le <*> getWord32le
            <*> getWord32le <*> getWord32le <*> getWord32le <*> getWord32le <*> getWord32le
            <*> getWord32le <*> getWord32le <*> getInt8 <*> getWord32le <*> getStr)
  0x82 -> MRequest <$> (Request <$> getTid <*> getWord32le <*> getInt8 <*> getWord8 <*> getWord64le
            <*> getStr <*> getStr <*> getField <*> getField)
  0x83 -> MResponse <$> answer
  0x84 -> MReply <$> (Reply <$> getWord32le <*> getWord16le <*> getWord32le <*> getStr)
  0x85 -> do
    t <- getTid
    count <- getWord32le
    MMcastSent . McastSent t <$> replicateM (fromIntegral count) getTid
  0x86 -> MTerminate <$> getWord32le
  0x87 -> MError <$> getWord16le <*> getStr
  _ -> fail ("unknown frame type " ++ show typ)
  where
    control = Control <$> getWord32le <*> getStr
    send = Send <$> getTid <*> getWord32le <*> getInt8 <*> getWord8 <*> getStr <*> getField <*> getField
    answer = Answer <$> getTid <*> getWord16le <*> getField <*> getField

getTid :: Get TransId
getTid = TransId <$> getByteString 16

getStr :: Get Text
getStr = do
  n <- getWord16le
  raw <- getByteString (fromIntegral n)
  either (const (fail "a str field is not valid UTF-8")) pure (TE.decodeUtf8' raw)

getField :: Get B.ByteString
getField = do
  n <- getWord32le
  getByteString (fromIntegral n)
